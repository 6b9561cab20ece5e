//! `/v1/commits…` and `/v1/resolve`: checkpoint, show, update-metadata,
//! history, the summary queue, summarize, compact, materialize, resolve.

use super::{RefMove, RefRecord};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

use super::rules::{self, Rules};
use super::{ErrorBody, operations};
use crate::body_text::BodyText;
use crate::commit::Tags;
use crate::error::Result;
use crate::format::FormatId;
use crate::id::{ArtifactRef, CommitId, Principal, RefName, SessionId};
use crate::service::{Materialization, NewCommit, Stop};

/// Calls `$then!` with the fields every commit request has, a
/// checkpoint's (`POST /v1/commits`) and a batch commit's alike: written
/// once, here, so the two cannot drift.
macro_rules! with_commit_fields {
    ($then:ident ! ( $($args:tt)* )) => {
        $then! { $($args)* ; [
    /// The previous commit; absent for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<CommitId>,
    /// What the artifact holds.
    pub commit_type: CommitType,
    /// The artifact's format.
    pub format: FormatId,
    /// An artifact uploaded before (`POST /v1/artifacts`), or in a batch
    /// one of its `artifacts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_ref: Option<ArtifactRef>,
    /// The delta inline, as UTF-8 text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub delta: Option<BodyText>,
    /// The delta inline, base64-encoded (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        value_type = Option<String>,
        pattern = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
    )]
    pub delta_base64: Option<BodyText>,
    /// The context template the wrapper used (1 to 256 bytes, no control
    /// characters but tab and newline).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub template: String,
    /// Who checkpoints.
    pub principal: Principal,
    /// The machine it runs on (1 to 256 bytes, no control characters but tab and
    /// newline.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub machine: Option<String>,
    /// The wrapper's session: the same name `POST /v1/branches`, `GET
    /// /v1/branches?session_id=` and `POST /v1/sessions/{id}/end` take, so
    /// 1 to 191 of A-Z, a-z, 0-9, '.', '_', '-' and '/'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// Why it checkpoints.
    pub checkpoint: Trigger,
    /// A ticket the work belongs to (1 to 256 bytes, no control characters but tab and
    /// newline.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub ticket_id: Option<String>,
    /// A conversation thread the work belongs to (1 to 256 bytes, no control characters but tab and
    /// newline.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$"
    )]
    pub thread_id: Option<String>,
    /// A human-readable summary (at most 16 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 16384)]
    pub summary: Option<String>,
    /// Messages in the delta, if the wrapper knows; used only for formats
    /// ctx cannot count itself (opaque ones).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(maximum = 10_000_000)]
    pub message_count: Option<u64>,
    /// Tokens in the delta as the wrapper counted them. The server always
    /// stores its own estimate as the commit's `token_count`; a different
    /// claim is kept as the tag `client_token_count`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    #[schema(maximum = 1_000_000_000)]
    pub token_count: Option<u64>,
    /// When the wrapper checkpointed; the server's clock when absent. Send
    /// it to make retries idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<DateTime<Utc>>,
    /// Free-form labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = tags_schema)]
    pub tags: Option<Tags>,
        ] }
    };
}

/// Declares a commit request type: `$before` fields, the shared fields
/// ([`with_commit_fields`]), `$after` fields.
macro_rules! commit_request {
    (
        $(#[$meta:meta])* $name:ident
        { $( $(#[$bm:meta])* pub $bf:ident: $bt:ty, )* }
        { $( $(#[$am:meta])* pub $af:ident: $at:ty, )* } ;
        [ $( $(#[$sm:meta])* pub $sf:ident: $st:ty, )* ]
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$bm])* pub $bf: $bt, )*
            $( $(#[$sm])* pub $sf: $st, )*
            $( $(#[$am])* pub $af: $at, )*
        }
    };
}

/// `$from`'s shared fields ([`with_commit_fields`]) moved into a `$to`
/// with the fields `$extra` besides.
macro_rules! move_commit_fields {
    ($from:expr, $to:ident { $($extra:tt)* } ; [ $( $(#[$sm:meta])* pub $sf:ident: $st:ty, )* ]) => {{
        let from = $from;
        $to { $( $sf: from.$sf, )* $($extra)* }
    }};
}

with_commit_fields!(commit_request!(
    /// `POST /v1/commits`: one commit and, optionally, a ref move.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    CheckpointRequest
    {}
    {
        /// A ref to move to the new commit in the same write.
        #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
        pub ref_move: Option<RefMove>,
    }
));

impl CheckpointRequest {
    /// A delta checkpoint of `delta` by `principal` at a turn boundary, with
    /// everything optional left out; set the rest with struct update syntax.
    pub fn new(
        principal: Principal,
        template: impl Into<String>,
        format: FormatId,
        delta: impl Into<String>,
    ) -> Self {
        // The defaults are the domain's: one place says what a checkpoint
        // leaves out.
        let NewCommit {
            parent,
            commit_type,
            format,
            delta: _,
            template,
            principal,
            machine,
            session_id: _,
            checkpoint,
            ticket_id,
            thread_id,
            summary,
            message_count,
            token_count,
            created_at,
            tags,
            ref_move,
            branch: _,
        } = NewCommit::new(principal, template, format, bytes::Bytes::new());
        CheckpointRequest {
            parent,
            commit_type: commit_type.into(),
            format,
            artifact_ref: None,
            delta: Some(BodyText::from(delta.into())),
            delta_base64: None,
            template,
            principal,
            machine,
            session_id: None,
            checkpoint: checkpoint.into(),
            ticket_id,
            thread_id,
            summary,
            message_count,
            token_count,
            created_at,
            tags,
            ref_move: ref_move.map(Into::into),
        }
    }
}

/// `POST /v1/batch`: what one framework operation writes, as one atomic
/// write. At most 14 commits; 7 × commits + refs at most 100 (one
/// DynamoDB transaction); the whole body under the JSON body limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Artifacts given inline, each named by its hash. A commit's
    /// `artifact_ref` may name one; those no commit names are stored as
    /// uploads are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<BatchArtifact>,
    /// The commits, in order: each a checkpoint's fields (without `ref`),
    /// its parent an existing commit (`parent`) or an earlier commit of the
    /// batch (`parent_in_batch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 14)]
    pub commits: Vec<BatchCommitRequest>,
    /// The ref moves, each by compare-and-swap.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 100)]
    pub refs: Vec<BatchRefRequest>,
}

/// An artifact of a batch: its hash and its bytes, as UTF-8 text or in
/// base64 (as a checkpoint's `delta` and `delta_base64`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchArtifact {
    /// The BLAKE3 hash of the bytes; refused unless they hash to it.
    #[serde(rename = "ref")]
    pub artifact_ref: ArtifactRef,
    /// The bytes, as UTF-8 text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub text: Option<BodyText>,
    /// The bytes, base64-encoded (standard alphabet, padded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        value_type = Option<String>,
        pattern = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$"
    )]
    pub base64: Option<BodyText>,
}

with_commit_fields!(commit_request!(
    /// A commit of a batch: a checkpoint's fields but `ref` (a batch moves
    /// refs in `refs`), and `parent_in_batch`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    BatchCommitRequest
    {
        /// The index of its parent among the batch's earlier commits; not
        /// with `parent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(minimum = 0, maximum = 13)]
        pub parent_in_batch: Option<usize>,
    }
    {}
));

impl BatchCommitRequest {
    /// A batch commit of `req`'s fields (its `ref` must be absent), its
    /// parent in the batch when `parent_in_batch` is given.
    pub fn of(req: CheckpointRequest, parent_in_batch: Option<usize>) -> Self {
        with_commit_fields!(move_commit_fields!(
            req,
            BatchCommitRequest { parent_in_batch }
        ))
    }

    /// Its checkpoint fields (no `ref`), and its `parent_in_batch`.
    pub fn into_parts(self) -> (CheckpointRequest, Option<usize>) {
        let parent_in_batch = self.parent_in_batch;
        let req = with_commit_fields!(move_commit_fields!(
            self,
            CheckpointRequest { ref_move: None }
        ));
        (req, parent_in_batch)
    }
}

/// A ref move of a batch: `name` to `target` (an existing commit) or to
/// `target_in_batch` (a commit of the batch), by compare-and-swap from
/// `expected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRefRequest {
    /// The ref.
    pub name: RefName,
    /// The tip the caller believes the ref has; absent or null: the ref must
    /// not exist yet. A stale one is a 409 naming `refs[i].expected`, and
    /// nothing of the batch is written.
    #[serde(default)]
    pub expected: Option<CommitId>,
    /// An existing commit to point the ref at; not with `target_in_batch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<CommitId>,
    /// The index of the batch's commit to point the ref at; not with
    /// `target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 13)]
    pub target_in_batch: Option<usize>,
    /// What to do when the ref is not at `expected`: refuse the batch
    /// (`conflict`, the default), leave this ref where it is and write the
    /// rest (`skip`), or move it wherever it points (`overwrite`).
    #[serde(default, skip_serializing_if = "OnStale::is_conflict")]
    pub on_stale: OnStale,
}

/// What a batch's ref move does when the ref is not where its `expected`
/// says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnStale {
    /// Refuse the whole batch: 409 naming `refs[i].expected`, nothing
    /// written.
    #[default]
    Conflict,
    /// Leave this ref as it is (its entry of the answer's `refs` says
    /// where it points, null when it does not exist) and write the rest.
    Skip,
    /// Move it wherever it points, or create it.
    Overwrite,
}

impl OnStale {
    /// Whether it is the default, `conflict`.
    pub fn is_conflict(&self) -> bool {
        *self == OnStale::Conflict
    }
}

impl From<OnStale> for crate::service::OnStale {
    fn from(v: OnStale) -> Self {
        match v {
            OnStale::Conflict => crate::service::OnStale::Conflict,
            OnStale::Skip => crate::service::OnStale::Skip,
            OnStale::Overwrite => crate::service::OnStale::Overwrite,
        }
    }
}

/// What a batch wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchResponse {
    /// The commits as stored, in the request's order (one that existed
    /// already, as it was).
    pub commits: Vec<Commit>,
    /// The refs as they are after the batch, in the request's order; null
    /// for a move skipped (`on_stale: skip`) whose ref does not exist.
    pub refs: Vec<Option<RefRecord>>,
}

/// The fields that carry a commit's delta: exactly one is given.
const DELTA_FIELDS: &[(&str, &str)] = &[
    ("delta", "string"),
    ("delta_base64", "string"),
    ("artifact_ref", "string"),
];

impl Rules for CheckpointRequest {
    /// Exactly one of `delta`, `delta_base64` and `artifact_ref`; a
    /// compaction names its parent.
    fn rules() -> Vec<serde_json::Value> {
        vec![
            rules::exactly_one(DELTA_FIELDS),
            rules::compaction_has_a_parent(&[("parent", "string")]),
        ]
    }
}

impl Rules for BatchCommitRequest {
    /// Exactly one of `delta`, `delta_base64` and `artifact_ref`; not both
    /// `parent` and `parent_in_batch`; a compaction names its parent by
    /// either.
    fn rules() -> Vec<serde_json::Value> {
        vec![
            rules::exactly_one(DELTA_FIELDS),
            rules::not_both("parent", "parent_in_batch"),
            rules::compaction_has_a_parent(&[("parent", "string"), ("parent_in_batch", "integer")]),
        ]
    }
}

impl Rules for BatchArtifact {
    /// Exactly one of `text` and `base64`.
    fn rules() -> Vec<serde_json::Value> {
        vec![rules::exactly_one(&[
            ("text", "string"),
            ("base64", "string"),
        ])]
    }
}

impl Rules for BatchRefRequest {
    /// Exactly one of `target` and `target_in_batch`.
    fn rules() -> Vec<serde_json::Value> {
        vec![rules::exactly_one(&[
            ("target", "string"),
            ("target_in_batch", "integer"),
        ])]
    }
}

impl Rules for BatchRequest {
    /// One rule, a case per number of commits `c` (0 to 14): at least one
    /// commit or ref move; `BATCH_COMMIT_ACTIONS` × commits + refs at most
    /// `TRANSACTION_ACTIONS` (one DynamoDB transaction); each commit's
    /// `parent_in_batch` an earlier commit's index, each ref's
    /// `target_in_batch` one of the `c` commits'.
    fn rules() -> Vec<serde_json::Value> {
        use crate::store::{BATCH_COMMIT_ACTIONS, BATCH_REF_ACTIONS, TRANSACTION_ACTIONS};
        use serde_json::json;
        let most = TRANSACTION_ACTIONS / BATCH_COMMIT_ACTIONS;
        let cases = (0..=most).map(|c| {
            let refs = (TRANSACTION_ACTIONS - c * BATCH_COMMIT_ACTIONS) / BATCH_REF_ACTIONS;
            let target = if c == 0 {
                json!({"type": "null"})
            } else {
                json!({"type": ["integer", "null"], "maximum": c - 1})
            };
            let refs = json!({
                "type": "array",
                "items": {"type": "object", "properties": {"target_in_batch": target}},
                "maxItems": refs,
            });
            if c == 0 {
                // Ref moves alone: at least one.
                let mut refs = refs;
                refs["minItems"] = json!(1);
                return json!({
                    "type": "object",
                    "required": ["refs"],
                    "properties": {
                        "commits": {"type": "array", "items": {"type": "object"}, "maxItems": 0},
                        "refs": refs,
                    },
                });
            }
            let earlier = (0..c)
                .map(|k| {
                    let parent = if k == 0 {
                        json!({"type": "null"})
                    } else {
                        json!({"type": ["integer", "null"], "maximum": k - 1})
                    };
                    json!({"type": "object", "properties": {"parent_in_batch": parent}})
                })
                .collect::<Vec<_>>();
            json!({
                "type": "object",
                "required": ["commits"],
                "properties": {
                    "commits": {
                        "type": "array",
                        "items": {"type": "object"},
                        "prefixItems": earlier,
                        "minItems": c,
                        "maxItems": c,
                    },
                    "refs": refs,
                },
            })
        });
        vec![json!({ "anyOf": cases.collect::<Vec<_>>() })]
    }
}

/// `POST /v1/commits/{ctx}/materialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MaterializeRequest {
    /// `compaction` (default), `root`, or a `ctx-…` ancestor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^(compaction|root|ctx-[0-9a-f]{32})$")]
    pub stop: Option<Stop>,
    /// The format wanted; the tip's format when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FormatId>,
}

/// A materialized context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MaterializeResponse {
    /// The artifact holding it, its size, counts and tier.
    #[serde(flatten)]
    pub result: Materialized,
    /// Whether it came from the cache.
    pub cached: bool,
}

impl From<Materialization> for MaterializeResponse {
    fn from(m: Materialization) -> Self {
        MaterializeResponse {
            result: m.result.into(),
            cached: m.cached,
        }
    }
}

/// `POST /v1/read`: the context at a ref's tip (or at a commit) in one
/// request; give `ref` or `commit`, not both. `ref` may not be `null`;
/// `commit: null` is a fresh start (seed 000's `materialize(null)`), whose
/// context read answers the empty context, as does a ref with no commit
/// yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// The ref whose tip to read.
    #[serde(
        default,
        rename = "ref",
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub ref_name: Option<RefName>,
    /// The commit to read; `Some(None)` (`null` on the wire): none, a
    /// fresh start, read as the empty context.
    #[serde(
        default,
        deserialize_with = "not_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub commit: Option<Option<CommitId>>,
    /// `compaction` (default), `root`, or a `ctx-…` ancestor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Stop>,
    /// The format wanted; the tip's format when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<FormatId>,
    /// `true`: the commit's own delta (its artifact) rather than the context
    /// materialized up to it, or with `stop` the deltas from the stop to
    /// it, joined in its format: nothing is cached, and `format` is
    /// refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delta: bool,
    /// With `delta`: at most this many commits joined, the newest (1 to
    /// 1000; default all up to the stop). `parent` then names where to go
    /// on.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::number::optional_whole"
    )]
    pub depth: Option<u64>,
}

/// A field that may be left out but not given as `null`.
fn not_null<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// [`ReadRequest`]'s schema: [`MaterializeRequest`]'s fields with `ref`
/// and `commit`, exactly one of which is required (`oneOf`), which the
/// derive cannot say.
impl utoipa::PartialSchema for ReadRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{
            AllOfBuilder, AnyOfBuilder, ObjectBuilder, OneOfBuilder, Type,
        };
        use utoipa::openapi::{Ref, RefOr, Schema};
        let RefOr::T(Schema::Object(mut fields)) =
            <MaterializeRequest as utoipa::PartialSchema>::schema()
        else {
            unreachable!("MaterializeRequest's schema is an object")
        };
        fields.description = None;
        let named = |schema: &str, description: &str| {
            let mut r = Ref::from_schema_name(schema);
            r.description = description.to_owned();
            RefOr::Ref(r)
        };
        fields
            .properties
            .insert("ref".into(), named("RefName", "The ref whose tip to read."));
        fields.properties.insert(
            "commit".into(),
            OneOfBuilder::new()
                .item(ObjectBuilder::new().schema_type(Type::Null))
                .item(named(
                    "CommitId",
                    "The commit to read; `null`: none (a fresh start), whose context \
                     read is the empty context.",
                ))
                .into(),
        );
        fields.properties.insert(
            "delta".into(),
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .description(Some(
                    "`true`: the commit's own delta (its artifact) rather than the context \
                     materialized up to it, or with `stop` the deltas from the stop to it, \
                     joined in its format: nothing is cached, and `format` is refused.",
                ))
                .into(),
        );
        fields.properties.insert(
            "depth".into(),
            ObjectBuilder::new()
                .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                    Type::Integer,
                    Type::Null,
                ]))
                .minimum(Some(1))
                .maximum(Some(1000))
                .description(Some(
                    "With `delta`: at most this many commits joined, the newest (1 to 1000; \
                     default all up to the stop). `parent` then names where to go on.",
                ))
                .into(),
        );
        let one = |field: &str| ObjectBuilder::new().required(field).build();
        // A context read (`delta` absent or false) takes no `depth`; a
        // delta read (`delta` true) takes no `format`.
        let null = || ObjectBuilder::new().schema_type(Type::Null);
        let context = ObjectBuilder::new()
            .property(
                "delta",
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .enum_values(Some([false])),
            )
            .property("depth", null());
        let bare = ObjectBuilder::new()
            .required("delta")
            .property(
                "delta",
                ObjectBuilder::new()
                    .schema_type(Type::Boolean)
                    .enum_values(Some([true])),
            )
            .property("format", null())
            .property("commit", named("CommitId", "A delta read's commit."));
        AllOfBuilder::new()
            .description(Some(
                "`POST /v1/read`: the context at a ref's tip (or at a commit) in one \
                 request; give `ref` or `commit`, not both. `commit: null` is a fresh \
                 start: its context read answers the empty context, as a ref with no \
                 commit yet does.",
            ))
            .item(fields)
            .item(OneOfBuilder::new().item(one("ref")).item(one("commit")))
            .item(AnyOfBuilder::new().item(context).item(bare))
            .into()
    }
}

impl utoipa::ToSchema for ReadRequest {}

/// A context read in one request: the commit, its materialization (or,
/// for a `delta` read, its own artifact) and, when it is at most
/// [`READ_CONTENT_BYTES`], its bytes (as UTF-8 text, or
/// base64 when they are not UTF-8). Larger contexts are downloaded from
/// `artifact_ref` (`GET /v1/artifacts/{art}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReadResponse {
    /// The commit read (the ref's tip); `null` for the empty context of a
    /// fresh start or of a ref with no commit yet (nothing stored: its
    /// bytes always come inline).
    #[schema(required = true)]
    pub commit: Option<CommitId>,
    /// On a `delta` read, the parent of the first commit joined (without
    /// `stop`, the commit's own parent); absent for a root and for a
    /// context read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<CommitId>,
    /// The artifact holding the context, its size, counts and tier.
    #[serde(flatten)]
    pub result: Materialized,
    /// Whether it came from the cache.
    pub cached: bool,
    /// The bytes, as UTF-8 text: when they are UTF-8 and their JSON
    /// string is no longer than their base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The bytes, base64-encoded (standard alphabet, padded): when they are
    /// not UTF-8, or JSON would escape so many of them (control
    /// characters, quotes) that base64 is shorter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
}

impl ReadResponse {
    /// `content` and `content_base64` for `bytes`: whichever is shorter in
    /// the response, so that the answer is never over 4/3 of the bytes
    /// (JSON escapes a control character in six bytes: 1 MiB of them as
    /// text would be over a Lambda response's 6 MB).
    pub fn content_fields(bytes: &[u8]) -> (Option<String>, Option<String>) {
        use base64::Engine as _;
        let escaped: usize = bytes
            .iter()
            .map(|&b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
                0..0x20 => 6,
                _ => 1,
            })
            .sum();
        match std::str::from_utf8(bytes) {
            Ok(text) if escaped <= bytes.len().div_ceil(3) * 4 => (Some(text.to_owned()), None),
            _ => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            ),
        }
    }
}

/// The most bytes `POST /v1/read` answers inline (1 MiB: at most 4/3 of it
/// in the response, well inside a Lambda response's 6 MB).
pub const READ_CONTENT_BYTES: u64 = 1024 * 1024;

/// `PATCH /v1/commits/{ctx}`: summary and tags are all that may change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMetadataRequest {
    /// A new summary; `null` clears it.
    #[serde(
        default,
        deserialize_with = "present",
        serialize_with = "nullable",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, max_length = 16384)]
    pub summary: Option<Option<String>>,
    /// Replaces every tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = tags_schema)]
    pub tags: Option<Tags>,
}

/// The schema of [`Tags`] as checked on the way in: at most 64, keys of
/// 1 to 128 bytes without control characters but tab and newline, values
/// of at most 1024 bytes; or null, which is as if they were left out.
fn tags_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, SchemaType, Type};
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .max_properties(Some(crate::commit::limits::TAGS))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(crate::commit::limits::TAG_KEY))
                .pattern(Some(SHORT_TEXT_PATTERN)),
        ))
        .additional_properties(Some(AdditionalProperties::RefOr(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(crate::commit::limits::TAG_VALUE))
                .into(),
        )))
        .description(Some("Free-form labels: key to value."))
        .build()
}

/// What base64 in a request is (the standard alphabet, padded, as
/// `base64`'s `STANDARD` engine decodes it): whole quanta, the last one
/// padded to four characters, its unused bits zero. The fields that take
/// base64 spell it out (utoipa takes a literal); a test holds them to it.
#[cfg(test)]
const BASE64_PATTERN: &str =
    "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

/// What a short text field allows: no control characters but tab and
/// newline.
const SHORT_TEXT_PATTERN: &str = "^[^\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f]*$";

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

/// Writes `Some(None)` as `null` (a field left out is skipped).
fn nullable<S: Serializer>(v: &Option<Option<String>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(inner) => inner.serialize(s),
        None => s.serialize_none(),
    }
}

/// A page of commits, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HistoryResponse {
    /// The commits.
    pub commits: Vec<Commit>,
    /// Present when the page stopped before the root: where the next page
    /// starts. Pass it as `cursor` (it is that commit's id, so its own
    /// history is the same page); absent once the root is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<CommitId>,
}

/// A commit lacking a summary, with where it stands in the summary queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MissingSummary {
    /// The commit.
    #[serde(flatten)]
    pub commit: Commit,
    /// Its summary queue state.
    pub summary_state: SummaryState,
}

/// A page of commits lacking a summary, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MissingSummaryList {
    /// The commits.
    pub commits: Vec<MissingSummary>,
    /// Pass as `cursor` for the next page; absent after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

impl From<crate::store::MissingPage> for MissingSummaryList {
    fn from(page: crate::store::MissingPage) -> Self {
        MissingSummaryList {
            commits: page
                .items
                .into_iter()
                .map(|m| MissingSummary {
                    commit: m.commit.into(),
                    summary_state: m.state.into(),
                })
                .collect(),
            next_cursor: page.next.map(|c| c.to_string()),
        }
    }
}

/// The one value `GET /v1/commits` takes for `missing_summary`: only
/// commits lacking a summary are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub enum MissingSummaryFilter {
    /// Commits lacking a summary.
    #[serde(rename = "true")]
    True,
}

/// A request to summarize one commit now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeRequest {
    /// Replace a summary the commit already has (otherwise that is a 409).
    #[serde(default)]
    pub force: bool,
}

/// A request to re-compact the context at a commit: summarize it and
/// record the summary as a compaction commit on top of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactRequest {
    /// The summarizer to use: the server's configured one when absent (or
    /// named, as `openai` or `openai:gpt-4o-mini`), or `extractive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 256)]
    pub summarizer: Option<String>,
    /// A ref to move to the compaction in the same write (compare-and-swap).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_move: Option<RefMove>,
}

/// What a re-compaction recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CompactResponse {
    /// The compaction commit; its parent is the compacted commit.
    pub commit: Commit,
    /// Messages in the context the summary stands in for.
    pub replaced_messages: u64,
    /// Tokens in the context the summary stands in for.
    pub replaced_tokens: u64,
}

/// A resolved commit id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResolveResponse {
    /// The newest commit at or before the time.
    pub id: CommitId,
}

#[cfg(test)]
mod base64_tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    /// The document's base64 pattern matches exactly what the server
    /// decodes: every padded last quantum, with and without its unused
    /// bits zero, after whole quanta or alone.
    #[test]
    fn the_base64_pattern_is_what_the_decoder_takes() {
        let pattern = regex_lite::Regex::new(super::BASE64_PATTERN).unwrap();
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut cases = vec![
            String::new(),
            "A".into(),
            "AB".into(),
            "ABC".into(),
            "A===".into(),
            "AB=C".into(),
            "ABCD=".into(),
            "AB==CDEF".into(),
            " ABCD".into(),
            "AB-_".into(),
        ];
        for &a in alphabet {
            for &b in alphabet {
                let (a, b) = (a as char, b as char);
                cases.push(format!("{a}{b}=="));
                cases.push(format!("Q{a}{b}="));
                cases.push(format!("wxyz{a}{b}Q="));
            }
        }
        for n in 0..20 {
            cases.push(STANDARD.encode(vec![0xa5u8; n]));
        }
        for c in cases {
            assert_eq!(pattern.is_match(&c), STANDARD.decode(&c).is_ok(), "{c:?}");
        }
    }

    /// Every field that takes base64 says it with the pattern above.
    #[test]
    fn base64_fields_give_the_pattern() {
        use utoipa::PartialSchema;
        fn pattern_of<T: PartialSchema>(field: &str) -> serde_json::Value {
            serde_json::to_value(T::schema()).unwrap()["properties"][field]["pattern"].clone()
        }
        for got in [
            pattern_of::<super::CheckpointRequest>("delta_base64"),
            pattern_of::<super::BatchCommitRequest>("delta_base64"),
            pattern_of::<super::BatchArtifact>("base64"),
        ] {
            assert_eq!(got, super::BASE64_PATTERN);
        }
    }
}

#[cfg(test)]
mod read_tests {
    use super::ReadResponse;

    /// Text comes as text unless JSON's escapes would make it longer than
    /// base64; bytes that are not UTF-8 always come in base64; either way
    /// the field is at most 4/3 of the bytes (plus padding).
    #[test]
    fn read_content_takes_the_shorter_of_text_and_base64() {
        let cases: [(&[u8], bool); 5] = [
            (b"user: hello\n", true),
            (b"{\"a\": \"b\"}\n", true),
            (&[1u8; 300], false),
            (&[b'"'; 300], false),
            (&[0xff, 0xfe], false),
        ];
        for (bytes, as_text) in cases {
            let (text, b64) = ReadResponse::content_fields(bytes);
            assert_eq!(text.is_some(), as_text, "{bytes:?}");
            assert_eq!(b64.is_some(), !as_text, "{bytes:?}");
            let field = serde_json::to_string(&text.or(b64).unwrap()).unwrap();
            assert!(
                field.len() <= bytes.len().div_ceil(3) * 4 + 2,
                "{bytes:?}: {field}"
            );
        }
    }
}

/// A commit, with every field of the data model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Commit {
    /// Derived from (tenant, parent, artifact, created_at, template).
    pub id: CommitId,
    /// The previous commit; none for a root.
    pub parent: Option<CommitId>,
    /// What the artifact holds.
    pub commit_type: CommitType,
    /// The delta, summary or snapshot.
    pub artifact_ref: ArtifactRef,
    /// The artifact's size in bytes.
    pub artifact_size: u64,
    /// How the artifact's bytes are encoded and concatenate.
    pub format: FormatId,
    /// The context template the wrapper used.
    pub template: String,
    /// Who checkpointed.
    pub principal: Principal,
    /// The machine it ran on.
    pub machine: Option<String>,
    /// The wrapper's session.
    pub session_id: Option<SessionId>,
    /// Why it checkpointed.
    pub checkpoint: Trigger,
    /// A ticket the work belongs to.
    pub ticket_id: Option<String>,
    /// A conversation thread the work belongs to.
    pub thread_id: Option<String>,
    /// A human-readable summary; mutable.
    pub summary: Option<String>,
    /// Messages in this commit's artifact.
    pub message_count: u64,
    /// Tokens in this commit's artifact.
    pub token_count: u64,
    /// When the wrapper checkpointed (RFC 3339, UTC, µs precision).
    pub created_at: DateTime<Utc>,
    /// Free-form labels; mutable.
    #[serde(default)]
    pub tags: Tags,
    /// Distance from the root (a root has depth 0).
    pub depth: u64,
    /// The linear run this commit is stored in: the id of the run's first
    /// commit. A child continues its parent's run unless the parent already
    /// has a child there (a fork), in which case it starts its own.
    pub lineage: CommitId,
    /// The run the parent is stored in (equal to `lineage` inside a run).
    pub parent_lineage: Option<CommitId>,
}

impl From<crate::commit::Commit> for Commit {
    fn from(v: crate::commit::Commit) -> Self {
        Commit {
            id: v.id,
            parent: v.parent,
            commit_type: v.commit_type.into(),
            artifact_ref: v.artifact_ref,
            artifact_size: v.artifact_size,
            format: v.format,
            template: v.template,
            principal: v.principal,
            machine: v.machine,
            session_id: v.session_id,
            checkpoint: v.checkpoint.into(),
            ticket_id: v.ticket_id,
            thread_id: v.thread_id,
            summary: v.summary,
            message_count: v.message_count,
            token_count: v.token_count,
            created_at: v.created_at,
            tags: v.tags,
            depth: v.depth,
            lineage: v.lineage,
            parent_lineage: v.parent_lineage,
        }
    }
}

/// What a commit's artifact holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommitType {
    /// What the agent saw and said since its parent.
    Delta,
    /// A summary that replaces everything before it.
    Compaction,
    /// A full materialized context.
    Snapshot,
}

impl From<crate::commit::CommitType> for CommitType {
    fn from(v: crate::commit::CommitType) -> Self {
        match v {
            crate::commit::CommitType::Delta => CommitType::Delta,
            crate::commit::CommitType::Compaction => CommitType::Compaction,
            crate::commit::CommitType::Snapshot => CommitType::Snapshot,
        }
    }
}

impl From<CommitType> for crate::commit::CommitType {
    fn from(v: CommitType) -> Self {
        match v {
            CommitType::Delta => crate::commit::CommitType::Delta,
            CommitType::Compaction => crate::commit::CommitType::Compaction,
            CommitType::Snapshot => crate::commit::CommitType::Snapshot,
        }
    }
}

/// Why the wrapper checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The end of a user/assistant turn.
    TurnBoundary,
    /// After a tool call.
    ToolCall,
    /// The runtime compacted its context.
    Compaction,
    /// The session ended.
    SessionEnd,
    /// Someone asked for it.
    Explicit,
    /// A context-folding branch returned its result.
    BranchReturn,
}

impl From<crate::commit::Trigger> for Trigger {
    fn from(v: crate::commit::Trigger) -> Self {
        match v {
            crate::commit::Trigger::TurnBoundary => Trigger::TurnBoundary,
            crate::commit::Trigger::ToolCall => Trigger::ToolCall,
            crate::commit::Trigger::Compaction => Trigger::Compaction,
            crate::commit::Trigger::SessionEnd => Trigger::SessionEnd,
            crate::commit::Trigger::Explicit => Trigger::Explicit,
            crate::commit::Trigger::BranchReturn => Trigger::BranchReturn,
        }
    }
}

impl From<Trigger> for crate::commit::Trigger {
    fn from(v: Trigger) -> Self {
        match v {
            Trigger::TurnBoundary => crate::commit::Trigger::TurnBoundary,
            Trigger::ToolCall => crate::commit::Trigger::ToolCall,
            Trigger::Compaction => crate::commit::Trigger::Compaction,
            Trigger::SessionEnd => crate::commit::Trigger::SessionEnd,
            Trigger::Explicit => crate::commit::Trigger::Explicit,
            Trigger::BranchReturn => crate::commit::Trigger::BranchReturn,
        }
    }
}

/// What a translation did not carry as it was: messages kept, converted and
/// dropped, and each change with its reason. Messages are those ctx read
/// from the chain (the canonical conversation: a Claude Code transcript's
/// file snapshots and titles are none).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct Fidelity {
    /// Messages carried as they were.
    pub kept: u64,
    /// Messages carried in another form: a tool result as text, a message
    /// without its thinking, every message of a narrative.
    pub converted: u64,
    /// Messages left out: the target holds nothing of what they are.
    pub dropped: u64,
    /// Why the tier is not a better one (empty when nothing forced it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// The changes, in message order, at most 32 (`unlisted` counts the
    /// rest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FidelityChange>,
    /// Changes not listed.
    #[serde(default, skip_serializing_if = "crate::format::translate::is_zero")]
    pub unlisted: u64,
}

impl From<crate::format::translate::Fidelity> for Fidelity {
    fn from(v: crate::format::translate::Fidelity) -> Self {
        Fidelity {
            kept: v.kept,
            converted: v.converted,
            dropped: v.dropped,
            note: v.note,
            changes: v.changes.into_iter().map(Into::into).collect(),
            unlisted: v.unlisted,
        }
    }
}

/// One message a translation did not carry as it was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FidelityChange {
    /// Converted or dropped.
    pub kind: FidelityChangeKind,
    /// The message's position in the chain's conversation, from 0.
    pub message: u64,
    /// Where it was stored: the commit and the line or index in its delta.
    pub at: String,
    /// The tool call a converted tool result names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Why, and what became of it.
    pub reason: String,
}

impl From<crate::format::translate::FidelityChange> for FidelityChange {
    fn from(v: crate::format::translate::FidelityChange) -> Self {
        FidelityChange {
            kind: v.kind.into(),
            message: v.message,
            at: v.at,
            tool_use_id: v.tool_use_id,
            reason: v.reason,
        }
    }
}

/// Whether a message was carried in another form or left out.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FidelityChangeKind {
    /// Carried in another form.
    Converted,
    /// Left out.
    Dropped,
}

impl From<crate::format::translate::FidelityChangeKind> for FidelityChangeKind {
    fn from(v: crate::format::translate::FidelityChangeKind) -> Self {
        match v {
            crate::format::translate::FidelityChangeKind::Converted => {
                FidelityChangeKind::Converted
            }
            crate::format::translate::FidelityChangeKind::Dropped => FidelityChangeKind::Dropped,
        }
    }
}

impl From<FidelityChangeKind> for crate::format::translate::FidelityChangeKind {
    fn from(v: FidelityChangeKind) -> Self {
        match v {
            FidelityChangeKind::Converted => {
                crate::format::translate::FidelityChangeKind::Converted
            }
            FidelityChangeKind::Dropped => crate::format::translate::FidelityChangeKind::Dropped,
        }
    }
}

/// How a materialization was produced; on the wire its kebab-case name
/// (`native`, `field-level`, `cross-runtime`, `narrative`, `raw`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// Every part was in the target format.
    Native,
    /// Mapped field by field between versions of one runtime's format.
    FieldLevel,
    /// Translated faithfully through the canonical model.
    CrossRuntime,
    /// Rendered as a narrative of the conversation.
    Narrative,
    /// Raw bytes with a description of their format.
    Raw,
}

impl From<crate::format::translate::Tier> for Tier {
    fn from(v: crate::format::translate::Tier) -> Self {
        match v {
            crate::format::translate::Tier::Native => Tier::Native,
            crate::format::translate::Tier::FieldLevel => Tier::FieldLevel,
            crate::format::translate::Tier::CrossRuntime => Tier::CrossRuntime,
            crate::format::translate::Tier::Narrative => Tier::Narrative,
            crate::format::translate::Tier::Raw => Tier::Raw,
        }
    }
}

impl From<Tier> for crate::format::translate::Tier {
    fn from(v: Tier) -> Self {
        match v {
            Tier::Native => crate::format::translate::Tier::Native,
            Tier::FieldLevel => crate::format::translate::Tier::FieldLevel,
            Tier::CrossRuntime => crate::format::translate::Tier::CrossRuntime,
            Tier::Narrative => crate::format::translate::Tier::Narrative,
            Tier::Raw => crate::format::translate::Tier::Raw,
        }
    }
}

/// A cached materialization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Materialized {
    /// The artifact holding the materialized context.
    pub artifact_ref: ArtifactRef,
    /// Its size in bytes.
    pub size: u64,
    /// Messages in it.
    pub message_count: u64,
    /// Tokens in it.
    pub token_count: u64,
    /// How it was produced.
    pub tier: Tier,
    /// What a translation through the canonical model did not carry as it
    /// was: messages kept, converted and dropped, with the reasons. Absent
    /// when every message was carried as it was (tiers `native` and
    /// `field-level`) and for a target ctx cannot write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<Fidelity>,
}

impl From<crate::store::Materialized> for Materialized {
    fn from(v: crate::store::Materialized) -> Self {
        Materialized {
            artifact_ref: v.artifact_ref,
            size: v.size,
            message_count: v.message_count,
            token_count: v.token_count,
            tier: v.tier.into(),
            fidelity: v.fidelity.map(Into::into),
        }
    }
}

/// Where a commit stands in the summary queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SummaryState {
    /// A summarizer holds it until then.
    pub claimed_until: Option<DateTime<Utc>>,
    /// Failed attempts so far.
    pub attempts: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Not retried before then.
    pub retry_at: Option<DateTime<Utc>>,
}

impl From<crate::store::SummaryState> for SummaryState {
    fn from(v: crate::store::SummaryState) -> Self {
        SummaryState {
            claimed_until: v.claimed_until,
            attempts: v.attempts,
            last_error: v.last_error,
            retry_at: v.retry_at,
        }
    }
}

impl CommitType {
    /// Its name on the wire (`delta`, `compaction`, `snapshot`).
    pub fn as_str(self) -> &'static str {
        crate::commit::CommitType::from(self).as_str()
    }
}

impl Trigger {
    /// Its name on the wire (`turn_boundary`, ...).
    pub fn as_str(self) -> &'static str {
        crate::commit::Trigger::from(self).as_str()
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::format::translate::Tier::from(*self).fmt(f)
    }
}

impl std::fmt::Display for FidelityChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::format::translate::FidelityChangeKind::from(*self).fmt(f)
    }
}

operations! { COMMIT_OPERATIONS;
    /// Records a checkpoint: 201 with the new commit, or 200 with the stored one
    /// when the same checkpoint (same `created_at`) was recorded before. Into a
    /// branch's chain (`ref: branches/br-…`) it counts against the budget: the
    /// `ctx-budget-warning` header from 80%, a forced return at 100%, then 409.
    /// A `ctx-warning` header per thing stored as written although it looks
    /// wrong (a runtime transcript's tool result answering no tool use).
    Checkpoint = checkpoint: post "/v1/commits" in Checkpoint,
        json CheckpointRequest => Commit {
        tag = "commits", responses((status = 201, description = "Recorded", body = Commit,
                    headers(("ctx-budget-warning" = String, description = "Into a branch at 80% of its budget or more"))),
                (status = 200, description = "Recorded before", body = Commit),
                (status = 400, description = "A malformed request, or a delta that is not in its format", body = ErrorBody),
                (status = 404, description = "A parent or artifact that does not exist (`field` names it), or the branch of the ref", body = ErrorBody),
                (status = 409, description = "The ref moved (`current` says where to), or the branch ended", body = ErrorBody),
                (status = 413, description = "The delta or the body over its limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Writes a batch: the commits (each as a checkpoint, its parent an
    /// existing commit or an earlier one of the batch), the artifacts they and
    /// the caller name (inline, each by its hash) and the ref moves (each by
    /// compare-and-swap), as ONE atomic write: a 4xx writes nothing. At most
    /// 14 commits, and 7 × commits + refs at most 100 (one DynamoDB
    /// transaction), on every backend. 201 when a commit was new; 200 when
    /// every commit existed (a retry: nothing is written twice, and a ref
    /// already at its target is left alone) or for ref moves alone.
    Batch = batch: post "/v1/batch" in Checkpoint,
        json BatchRequest => BatchResponse {
        tag = "commits", responses((status = 201, description = "Written; at least one commit is new", body = BatchResponse,
                    headers(("ctx-budget-warning" = String, description = "A commit into a branch at 80% of its budget or more"))),
                (status = 200, description = "Written with no new commit: a retry, or ref moves alone", body = BatchResponse),
                (status = 400, description = "A malformed request naming the field (`artifacts[i].ref`, `commits[i].…`, `refs[i].…`)", body = ErrorBody),
                (status = 404, description = "A parent, artifact or ref target that does not exist (`field` names it: `commits[i].parent`, `commits[i].artifact_ref`, `refs[i].target`); nothing is written", body = ErrorBody),
                (status = 409, description = "A ref moved (`field` is `refs[i].expected`, `current` says where it points), or a branch ended; nothing is written", body = ErrorBody),
                (status = 413, description = "Too many commits or refs for one transaction, an artifact over its limit, or the body over its limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// One commit.
    GetCommit = get_commit: get "/v1/commits/{ctx}" in History,
        none => Commit {
        tag = "commits",
            params(("ctx" = CommitId, Path)),
            responses((status = 200, description = "The commit", body = Commit),
                (status = 400, description = "`ctx` is not a commit id", body = ErrorBody),
                (status = 404, description = "No such commit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Changes a commit's summary (null clears it) and replaces its tags.
    UpdateMetadata = update_metadata: patch "/v1/commits/{ctx}" in History,
        json UpdateMetadataRequest => Commit {
        tag = "commits", params(("ctx" = CommitId, Path)),
            responses((status = 200, description = "The commit as changed", body = Commit),
                (status = 400, description = "A malformed request", body = ErrorBody),
                (status = 404, description = "No such commit", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// The commits from `ctx` towards the root, newest first, a page at a time.
    ///
    /// A page that stops before the root names in `next` the commit the next
    /// page starts at; pass it as `cursor` for that page.
    History = history: get "/v1/commits/{ctx}/history" in History,
        none => HistoryResponse {
        tag = "commits",
            params(("ctx" = CommitId, Path),
                ("depth" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 50, at most 1000)"),
                ("cursor" = Option<CommitId>, Query, description = "The `next` of the previous page: the page starts there")),
            responses((status = 200, description = "The commits, newest first; `next` when the root was not reached", body = HistoryResponse),
                (status = 400, description = "`ctx` is not a commit id, `depth` is out of range, or `cursor` is not the `next` of a page of this history", body = ErrorBody),
                (status = 404, description = "No such commit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Commits lacking a summary, oldest first, with their summary queue state
    /// (claimed, failed, retry time). Only `missing_summary=true` is listed.
    MissingSummaries = missing_summaries: get "/v1/commits" in History,
        none => MissingSummaryList {
        tag = "commits",
            params(("missing_summary" = crate::wire::MissingSummaryFilter, Query, description = "`true`: the commits lacking a summary (the only listing there is)"),
                ("limit" = Option<u64>, Query, minimum = 1, maximum = 1000, description = "How many commits (default 100, at most 1000)"),
                ("cursor" = Option<String>, Query, pattern = r"^-?[0-9]{1,18}\.ctx-[0-9a-f]{32}$", description = "The `next_cursor` of the previous page")),
            responses((status = 200, description = "The commits, oldest first", body = MissingSummaryList),
                (status = 400, description = "`missing_summary` is not true, or `limit` or `cursor` is malformed", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Summarizes one commit now (its back-off ignored) and returns it.
    Summarize = summarize: post "/v1/commits/{ctx}/summarize" in History,
        json SummarizeRequest => Commit {
        tag = "commits", params(("ctx" = CommitId, Path)),
            responses((status = 200, description = "The commit with its new summary", body = Commit),
                (status = 400, description = "A malformed request", body = ErrorBody),
                (status = 404, description = "No such commit", body = ErrorBody),
                (status = 409, description = "It has a summary and `force` is not set, or another run is summarizing it", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody),
                (status = 503, description = "No summarizer is configured, or it failed (recorded as `summary_error`)", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Re-compacts the context at `ctx`: summarizes it (from its nearest
    /// compaction) and records the summary as a compaction commit whose parent
    /// is `ctx`, in the chain's format; a materialize of the new commit starts
    /// at the summary, `stop: root` still reaches the original history.
    Compact = compact: post "/v1/commits/{ctx}/compact" in Checkpoint,
        json CompactRequest => CompactResponse {
        tag = "commits", params(("ctx" = CommitId, Path)),
            responses((status = 201, description = "The compaction was recorded", body = CompactResponse),
                (status = 200, description = "The same compaction was recorded before", body = CompactResponse),
                (status = 400, description = "A malformed request or an unknown summarizer", body = ErrorBody),
                (status = 404, description = "No such commit", body = ErrorBody),
                (status = 409, description = "The ref moved", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody),
                (status = 503, description = "The summarizer failed; nothing was recorded", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Rebuilds the context at `ctx` from its stop point; cached per (commit, stop, format).
    Materialize = materialize: post "/v1/commits/{ctx}/materialize" in Materialize,
        json MaterializeRequest => MaterializeResponse {
        tag = "commits", params(("ctx" = CommitId, Path)),
            responses((status = 200, description = "The context", body = MaterializeResponse),
                (status = 400, description = "A malformed request, a stop that is not an ancestor, or a format that cannot be produced", body = ErrorBody),
                (status = 404, description = "No such commit, or a `stop` that does not exist", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// Reads the context at a ref's tip (or at a commit) in one request: the
    /// commit, its materialization (as `POST /v1/commits/{ctx}/materialize`
    /// makes it; with `delta`, the commit's own artifact instead) and, up to
    /// 1 MiB, its bytes inline; a larger context is downloaded from
    /// `artifact_ref`.
    Read = read: post "/v1/read" in Materialize,
        json ReadRequest => ReadResponse {
        tag = "commits", responses((status = 200, description = "The context", body = ReadResponse),
                (status = 400, description = "Neither or both of `ref` and `commit`, a stop that is not an ancestor, a format that cannot be produced, a delta read with a format, or a depth out of range or on a context read", body = ErrorBody),
                (status = 404, description = "No such ref or commit, or a `stop` that does not exist", body = ErrorBody),
                (status = 410, description = "A delta the read needs was evicted: the message names the compaction to read from", body = ErrorBody),
                (status = 413, description = "A body over the JSON limit", body = ErrorBody)),
            security(("bearer" = []))
    }
    /// What did `principal` know at `at`: the newest commit at or before it.
    Resolve = resolve: get "/v1/resolve" in Resolve,
        none => ResolveResponse {
        tag = "commits",
            params(("principal" = Principal, Query),
                ("at" = Option<chrono::DateTime<chrono::Utc>>, Query, description = "RFC 3339; default now")),
            responses((status = 200, description = "The commit", body = ResolveResponse),
                (status = 400, description = "`principal` or `at` missing or malformed", body = ErrorBody),
                (status = 404, description = "No commit of `principal` at or before `at`", body = ErrorBody)),
            security(("bearer" = []))
    }
}
