//! # ctx-core
//!
//! A git for AI-agent context: agents checkpoint what they know as commits
//! (`ctx-…`) whose deltas are BLAKE3-addressed artifacts (`art-…`); anyone
//! can later materialize, resolve, fork or audit them.
//!
//! # Layout
//! - [`id`]: `Hash`, the prefixed ids and validated names.
//! - [`commit`]: the commit model and its field limits.
//! - [`format`]: format ids, the codec per format, the canonical message
//!   model and translation between formats.
//! - [`store`]: the `BlobStore` / `MetaStore` / `TokenStore` traits, their
//!   backends (memory, local) and the conformance suite.
//! - [`service`]: every operation, over the stores, one file per family
//!   (checkpoint, artifacts, commits, walk, materialize, refs, folding).
//! - [`auth`]: credentials → tenant.
//! - [`branch`]: context folding's records, store trait, settings,
//!   deadline timers, scrubbing and wire types.
//! - [`wire`]: every request and response body of the HTTP API, shared by
//!   the server, the CLI's client and the MCP tools.
//! - [`api`]: the one axum router, error mapping, OpenAPI document.
//! - [`clock`]: time and randomness, injected.
//! - [`config`]: every `CTX_*` setting, read once into one `Config`.
//! - [`wiring`]: the backends a process needs, built from its `Config`.
//! - [`error`]: the error type and its kinds.

pub mod api;
pub mod auth;
pub mod branch;
pub mod clock;
pub mod commit;
pub mod config;
pub mod error;
pub mod format;
pub mod id;
pub mod service;
pub mod store;
pub mod wire;
pub mod wiring;

pub use clock::{Clock, IdSource, ManualClock, OsRandom, SystemClock};
pub use commit::{Commit, CommitType, Trigger};
pub use error::{Error, ErrorKind, Result};
pub use id::{ArtifactRef, BranchId, CommitId, Hash, Principal, RefName, TenantId};
pub use service::Service;
