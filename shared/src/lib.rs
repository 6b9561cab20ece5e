//! # ctx-core
//!
//! A git for AI-agent context: agents checkpoint what they know as commits
//! (`ctx-…`) whose deltas are BLAKE3-addressed artifacts (`art-…`); anyone
//! can later materialize, resolve, fork or audit them.
//!
//! # Layout
//! - [`agent`]: agents' live context records (settings, clear marker,
//!   working-context cache pointer, saves).
//! - [`id`]: `Hash`, the prefixed ids and validated names.
//! - [`commit`]: the commit model, its field limits and the materialize
//!   stop point.
//! - [`format`](mod@format): format ids, the codec per format (`raw`, `claude_code`,
//!   `bureau_v1`, `bureau_v2`, `anthropic`, `openai`), the
//!   [`format::canonical`] message model and [`format::translate`].
//! - [`store`]: the `BlobStore` / `MetaStore` / `TokenStore` traits and the
//!   backends, each offering every store including branches:
//!   [`store::memory`], `store::local` (filesystem CAS + SQLite, feature
//!   `local`), `store::aws` (S3 + DynamoDB, feature `aws`), and the
//!   conformance suite every backend runs (`store::conformance`, feature
//!   `conformance`).
//! - [`service`]: every operation over the stores, one private file per
//!   family: `checkpoint`, `artifacts`, `commits`, `walk`, `materialize`,
//!   `refs`, `workspaces`, `folding` (create, end, budget, status, timer).
//! - [`branch`]: context folding's records, the `BranchStore` trait and the
//!   rules every branch store shares, settings, [`branch::scrub`],
//!   [`branch::timer`] (the deadline timer trait; AWS mode's Step Functions
//!   timer is `store::aws::sfn`) and
//!   [`branch::wire`].
//! - [`wire`]: every request and response body of the HTTP API, shared by
//!   the server, the CLI's client and the MCP tools; [`inline`]: large
//!   inline fields that share the request body's buffer; [`number`]: whole
//!   numbers written as floats (`51.0`) read as integers.
//! - [`api`]: the one axum router, [`api::extract`] (strict JSON and query
//!   parsing), [`api::error`] (kind → status), the OpenAPI document.
//! - [`auth`]: credentials → tenant.
//! - [`clock`]: time and randomness, injected.
//! - [`config`]: every `CTX_*` setting, read once into one `Config`.
//! - [`wiring`]: the backends a process needs, built from its `Config`.
//! - [`error`]: the error type and its kinds.
//! - [`workspace`]: workspace ids and file paths, and the read_context
//!   assembly over a file source (the store, or local directories).

pub mod agent;
pub mod api;
pub mod auth;
pub mod branch;
pub mod clock;
pub mod commit;
pub mod config;
pub mod error;
pub mod format;
pub mod id;
pub mod inline;
pub mod number;
pub mod service;
pub mod store;
pub mod summarize;
pub mod wire;
pub mod wiring;
pub mod workspace;

pub use clock::{Clock, IdSource, ManualClock, OsRandom, SystemClock};
pub use commit::{Commit, CommitType, Trigger};
pub use error::{Error, ErrorKind, Result};
pub use id::{ArtifactRef, BranchId, CommitId, Hash, Principal, RefName, SessionId, TenantId};
pub use service::Service;
