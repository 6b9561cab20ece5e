//! The wire contract: every request and response body of the HTTP API,
//! `Serialize + Deserialize`, shared by the server (`crate::api`), the
//! CLI's typed client and the MCP tools, so a contract change breaks the
//! build instead of a client. One file per route family; every type is
//! re-exported here, so `crate::wire::X` names any of them.
//!
//! The service never sees these types: the API layer turns requests into
//! the service's domain values, in the handler's own file (such as
//! `POST /v1/commits`'s in `api/commits.rs`), and results become responses
//! here, by `From` impls the handlers call.
//!
//! # Layout
//! - [`ops`]: every operation, declared once (the [`Operation`] trait, the
//!   [`operations!`] macro, [`Group`], [`all`]); each family's declarations
//!   are in its own file below.
//! - [`error`]: the body of every error response.
//! - `rules`: what a request's schema says beyond its fields (which fields
//!   go together), written beside each type.
//! - `ids`: the schemas of the ids and names (their parsers' rules).
//! - [`commits`]: checkpoint, show, update-metadata, history, the summary
//!   queue, summarize, compact, materialize, resolve.
//! - [`artifacts`]: uploads, direct uploads, garbage collection.
//! - [`refs`]: reading, moving and listing refs.
//! - [`lifecycle`]: eviction, erases, pins.
//! - [`branches`]: context folding (`/v1/branches…`, session end).
//! - [`workspaces`]: workspace files.
//! - [`agents`]: agents' settings, window, saves and working context.

pub mod agents;
pub mod artifacts;
pub mod branches;
pub mod commits;
pub mod error;
mod ids;
pub mod lifecycle;
pub mod ops;
pub mod refs;
pub(crate) mod rules;
pub mod workspaces;

pub use agents::*;
pub use artifacts::*;
pub use branches::*;
pub use commits::*;
pub use error::*;
pub use ids::{KnownFormat, PinName};
pub use lifecycle::*;
pub use ops::*;
pub use refs::*;
pub use workspaces::*;

pub use crate::agent::SaveId;
