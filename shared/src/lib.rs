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
//! - [`format`](mod@format): format ids, the codec per format (`raw`,
//!   `claude_code`, `bureau_v1`, `bureau_v2`, `anthropic`, `openai`,
//!   `openai_responses`), the [`format::canonical`] message model and
//!   [`format::translate`].
//! - [`store`]: the `BlobStore` / `MetaStore` / `TokenStore` traits and the
//!   backends, each offering every store including branches:
//!   [`store::memory`], `store::local` (filesystem CAS + SQLite, feature
//!   `local`), `store::aws` (S3 + DynamoDB, feature `aws`), and the
//!   conformance suite every backend runs (`store::conformance`, feature
//!   `conformance`); [`store::counting`] (a blob store that counts what
//!   passes through) and `store::packed` (inline deltas at rest).
//! - [`service`]: every operation over the stores, one private file per
//!   family: `checkpoint`, `artifacts`, `commits`, `walk`, `materialize`,
//!   `hot` (the in-memory result cache), `refs`, `workspaces`, `branches`
//!   (create, end, budget, status, timer), `agents` (agents' live
//!   context: settings, window, saves, working context, rebuild,
//!   messages), `summaries` (the summary batch), `compact` (re-compaction),
//!   `evict` (dropping old deltas), `gc` (the cache budget and garbage
//!   collection), `lifecycle` (erasure and retention) and `tenant_erase`.
//! - [`summarize`]: the `Summarizer` trait and its backends: `extractive`,
//!   and the model backends behind features (`openai` and `anthropic`:
//!   `summarize-http`; `bedrock`: `summarize-bedrock`).
//! - [`branch`]: context folding's records, the values its operations take
//!   and return, the `BranchStore` trait and the rules every branch store
//!   shares, settings, [`branch::scrub`] and [`branch::timer`] (the
//!   deadline timer trait; AWS mode's Step Functions timer is
//!   `store::aws::sfn`).
//! - [`wire`]: the contract. Every operation declared once
//!   ([`wire::Operation`], the `operations!` block of each family file:
//!   verb, path, group, request, response, what the document says), every
//!   request and response body, the ids' schemas, and the conversions of
//!   the service's values into responses; shared by the server, the CLI's
//!   client and the MCP tools. Only `wire` types have a schema.
//!   [`body_text`]: large text fields of a request body that share its
//!   buffer; [`number`]: whole numbers written as floats (`51.0`) read as
//!   integers.
//! - [`api`]: the one axum router: the route table (each family's handlers
//!   registered by their operations), the OpenAPI document built from the
//!   declarations, one private file of handlers per family (`artifacts`,
//!   `commits`, `refs`, `branches`, `lifecycle`, `workspaces`, `agents`),
//!   [`api::Reply`] (the only JSON answer: a `wire` type),
//!   [`api::extract`] (strict JSON and query parsing), [`api::error`] (kind
//!   → status), [`api::limits`] (the request-body bytes in flight),
//!   `api::testing` (the tables every host of the router is held to;
//!   feature `conformance`).
//! - [`auth`]: credentials → tenant.
//! - [`clock`]: time and randomness, injected.
//! - [`config`]: every `CTX_*` setting, read once into one `Config`.
//! - [`bootstrap`]: the backends a process needs, built from its `Config`.
//! - [`error`]: the error type and its kinds.
//! - [`ui`]: the context browser, static pages served at `/ui`.
//! - [`workspace`]: workspace ids and file paths, and the read_context
//!   assembly over a file source (the store, or local directories).
//!
//! The layers, what each may name, and the walk of one request are in
//! docs/architecture.md; the guides in docs/ describe what these do for a
//! user; docs/adr/ records why they are built this way.

pub mod agent;
pub mod api;
pub mod auth;
pub mod body_text;
pub mod bootstrap;
pub mod branch;
pub mod clock;
pub mod commit;
pub mod config;
pub mod error;
pub mod format;
pub mod id;
pub mod number;
pub mod service;
pub mod store;
pub mod summarize;
pub mod telemetry;
pub mod ui;
pub mod wire;
pub mod workspace;

pub use clock::{Clock, IdSource, ManualClock, OsRandom, SystemClock};
pub use commit::{Commit, CommitType, Trigger};
pub use error::{Error, ErrorKind, Result};
pub use id::{ArtifactRef, BranchId, CommitId, Hash, Principal, RefName, SessionId, TenantId};
pub use service::Service;
