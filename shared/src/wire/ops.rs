//! Every operation of the HTTP API, declared once.
//!
//! An operation is a unit type implementing [`Operation`]: its operationId
//! (the method's name in every client: the CLI's typed client, Python,
//! TypeScript), its [`Verb`] and path, the [`Group`] (the Lambda function)
//! that serves it, its request and response types, its doc, and what the
//! OpenAPI document says of it. Each family's operations are declared by
//! one [`operations!`] call in that family's file (`wire/commits.rs`, ...)
//! beside its request and response types; [`all`] lists every one.
//!
//! Everything else derives from these declarations:
//! - the route table (`api::routes`): each handler is registered with
//!   `route::<SomeOp>(handler)`, taking the method, path and group from here;
//! - the OpenAPI document (`api::ApiDoc`), and from it the Python and
//!   TypeScript clients and the MCP tools' input schemas;
//! - the CLI's typed client (`ctx_cli::client`), which fills an operation's
//!   path and sends its request type;
//! - the test that holds template.yaml's routes to the route table.
//!
//! Paths are in axum's syntax: `{id}` is one segment, `{*name}` a name that
//! may contain '/'. A path may go on after a `{*name}` (`/v1/refs/{*name}/evict`):
//! neither axum nor API Gateway can route that, so the route is served on
//! the path up to the greedy parameter ([`OperationInfo::route_path`]) and
//! the handler takes the suffix off ([`OperationInfo::suffix`]).

use utoipa::openapi::path::{HttpMethod, Operation as Documented};
use utoipa::openapi::{RefOr, schema::Schema};

/// A set of operations one host serves (one Lambda function serves one or
/// more groups; `ctx serve` serves them all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Group {
    /// `/healthz`, `/v1/openapi.json`.
    Meta,
    /// Artifact upload and download.
    Artifacts,
    /// Checkpoint (commit creation).
    Checkpoint,
    /// Show, history, update-metadata.
    History,
    /// Materialize.
    Materialize,
    /// Resolve.
    Resolve,
    /// Refs.
    Refs,
    /// Context folding: branches and session end.
    Branches,
    /// Workspace files and read_context.
    Workspaces,
    /// Agents' live context: settings, window, clear, saves, working
    /// context.
    Agents,
}

impl Group {
    /// Every group.
    pub const ALL: &'static [Group] = &[
        Group::Meta,
        Group::Artifacts,
        Group::Checkpoint,
        Group::History,
        Group::Materialize,
        Group::Resolve,
        Group::Refs,
        Group::Branches,
        Group::Workspaces,
        Group::Agents,
    ];
}

/// The HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// `GET`.
    Get,
    /// `PUT`.
    Put,
    /// `POST`.
    Post,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

impl Verb {
    /// The method's name, upper case (`GET`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Put => "PUT",
            Verb::Post => "POST",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }

    /// As an `http` method.
    pub fn method(self) -> axum::http::Method {
        match self {
            Verb::Get => axum::http::Method::GET,
            Verb::Put => axum::http::Method::PUT,
            Verb::Post => axum::http::Method::POST,
            Verb::Patch => axum::http::Method::PATCH,
            Verb::Delete => axum::http::Method::DELETE,
        }
    }

    fn documented(self) -> HttpMethod {
        match self {
            Verb::Get => HttpMethod::Get,
            Verb::Put => HttpMethod::Put,
            Verb::Post => HttpMethod::Post,
            Verb::Patch => HttpMethod::Patch,
            Verb::Delete => HttpMethod::Delete,
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of a request or response that is raw bytes
/// (`application/octet-stream`), not JSON.
pub type Bytes = Vec<u8>;

/// One operation of the API. Implemented by the unit types that
/// [`operations!`] declares; see the module's doc.
pub trait Operation: 'static {
    /// Its operationId: the method's name in every client.
    const ID: &'static str;
    /// Its method.
    const VERB: Verb;
    /// Its path, in axum syntax.
    const PATH: &'static str;
    /// The group (the Lambda function) that serves it.
    const GROUP: Group;
    /// What it takes as its body: a JSON type, `Option<T>` for an optional
    /// JSON body, [`Bytes`] or `String` for a raw body, `()` for none.
    type Request;
    /// What it answers on success: a JSON type, [`Bytes`] or `String` for a
    /// raw body, `()` for none (204).
    type Response;
    /// The same, as a value.
    const INFO: OperationInfo;
}

/// What [`Operation`] says of one operation, as a value: the entries of
/// [`all`].
#[derive(Clone, Copy)]
pub struct OperationInfo {
    /// Its operationId.
    pub id: &'static str,
    /// Its method.
    pub verb: Verb,
    /// Its path, in axum syntax.
    pub path: &'static str,
    /// The group that serves it.
    pub group: Group,
    document: fn() -> Documented,
    schemas: fn(&mut Vec<(String, RefOr<Schema>)>),
}

impl std::fmt::Debug for OperationInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.verb, self.path, self.id)
    }
}

impl OperationInfo {
    #[doc(hidden)]
    pub const fn new(
        id: &'static str,
        verb: Verb,
        path: &'static str,
        group: Group,
        document: fn() -> Documented,
        schemas: fn(&mut Vec<(String, RefOr<Schema>)>),
    ) -> Self {
        OperationInfo {
            id,
            verb,
            path,
            group,
            document,
            schemas,
        }
    }

    /// The path as the OpenAPI document gives it (`{*name}` is `{name}`).
    pub fn openapi_path(&self) -> String {
        openapi_path(self.path)
    }

    /// The path the route is served on: the whole path, or, where the path
    /// goes on after a `{*name}`, the path up to that parameter.
    pub fn route_path(&self) -> &'static str {
        let suffix = self.suffix().map_or(0, str::len);
        &self.path[..self.path.len() - suffix]
    }

    /// What follows a `{*name}` parameter in the path (`/evict`), if
    /// anything: the handler of the route takes it off.
    pub fn suffix(&self) -> Option<&'static str> {
        let greedy = self.path.find("{*")?;
        let end = greedy + self.path[greedy..].find('}')? + 1;
        Some(&self.path[end..]).filter(|s| !s.is_empty())
    }

    /// The names of the path's parameters, in order (`{*name}` is `name`).
    pub fn path_params(&self) -> impl Iterator<Item = &'static str> {
        self.path.split('/').filter_map(|seg| {
            seg.strip_prefix('{')?
                .strip_suffix('}')
                .map(|p| p.trim_start_matches('*'))
        })
    }

    /// The operation as the OpenAPI document gives it.
    pub fn document(&self) -> Documented {
        (self.document)()
    }

    /// The schemas it refers to, for the document's components.
    pub fn schemas(&self, out: &mut Vec<(String, RefOr<Schema>)>) {
        (self.schemas)(out)
    }

    /// The method as the OpenAPI document names it.
    pub fn documented_method(&self) -> HttpMethod {
        self.verb.documented()
    }
}

/// `path` in OpenAPI syntax: `{*name}` becomes `{name}`.
pub fn openapi_path(path: &str) -> String {
    path.replace("{*", "{")
}

/// Every operation of the API, family by family.
pub fn all() -> impl Iterator<Item = &'static OperationInfo> {
    [
        META_OPERATIONS,
        super::artifacts::ARTIFACT_OPERATIONS,
        super::commits::COMMIT_OPERATIONS,
        super::refs::REF_OPERATIONS,
        super::lifecycle::LIFECYCLE_OPERATIONS,
        super::branches::BRANCH_OPERATIONS,
        super::workspaces::WORKSPACE_OPERATIONS,
        super::agents::AGENT_OPERATIONS,
    ]
    .into_iter()
    .flatten()
}

/// The operation whose operationId is `id`.
pub fn by_id(id: &str) -> Option<&'static OperationInfo> {
    all().find(|op| op.id == id)
}

/// Declares a family of operations: for each, a unit type implementing
/// [`Operation`] (and `utoipa::Path`), and the family's list, a
/// `pub(crate) static` named by the first argument.
///
/// ```text
/// operations! { COMMIT_OPERATIONS;
///     /// The doc: the first paragraph is the document's summary.
///     Checkpoint = checkpoint: post "/v1/commits" in Checkpoint,
///         json CheckpointRequest => Commit {
///         tag = "commits", responses(...), security(("bearer" = []))
///     }
/// }
/// ```
///
/// The request is `json T`, `optional T` (a JSON body that may be absent),
/// `bytes` (`application/octet-stream`), `text "content/type" as S` (a text
/// body, `String` to the handler, whose schema, description included, is
/// `S`'s), or `none`. The braces hold the rest of what `#[utoipa::path]`
/// takes: tag, params, responses, security.
#[macro_export]
#[doc(hidden)]
macro_rules! __operations {
    (@list $list:ident [$($done:ident)*]) => {
        pub(crate) static $list: &[$crate::wire::OperationInfo] =
            &[$(<$done as $crate::wire::Operation>::INFO),*];
    };
    (@list $list:ident [$($done:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident = $id:ident: $verb:ident $path:literal in $group:ident,
        json $req:ty => $resp:ty { $($attr:tt)* }
        $($rest:tt)*
    ) => {
        $crate::__operations!(@op [$(#[doc = $doc])*] $name $id $verb $path $group
            [request_body = $req,] $req; $resp; $($attr)*);
        $crate::__operations!(@list $list [$($done)* $name] $($rest)*);
    };
    (@list $list:ident [$($done:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident = $id:ident: $verb:ident $path:literal in $group:ident,
        optional $req:ty => $resp:ty { $($attr:tt)* }
        $($rest:tt)*
    ) => {
        $crate::__operations!(@op [$(#[doc = $doc])*] $name $id $verb $path $group
            [request_body = Option<$req>,] Option<$req>; $resp; $($attr)*);
        $crate::__operations!(@list $list [$($done)* $name] $($rest)*);
    };
    (@list $list:ident [$($done:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident = $id:ident: $verb:ident $path:literal in $group:ident,
        bytes => $resp:ty { $($attr:tt)* }
        $($rest:tt)*
    ) => {
        $crate::__operations!(@op [$(#[doc = $doc])*] $name $id $verb $path $group
            [request_body(content = Vec<u8>, content_type = "application/octet-stream"),]
            $crate::wire::Bytes; $resp; $($attr)*);
        $crate::__operations!(@list $list [$($done)* $name] $($rest)*);
    };
    (@list $list:ident [$($done:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident = $id:ident: $verb:ident $path:literal in $group:ident,
        text $ctype:literal as $schema:ty => $resp:ty { $($attr:tt)* }
        $($rest:tt)*
    ) => {
        $crate::__operations!(@op [$(#[doc = $doc])*] $name $id $verb $path $group
            [request_body(content = $schema, content_type = $ctype),]
            String; $resp; $($attr)*);
        $crate::__operations!(@list $list [$($done)* $name] $($rest)*);
    };
    (@list $list:ident [$($done:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident = $id:ident: $verb:ident $path:literal in $group:ident,
        none => $resp:ty { $($attr:tt)* }
        $($rest:tt)*
    ) => {
        $crate::__operations!(@op [$(#[doc = $doc])*] $name $id $verb $path $group
            [] (); $resp; $($attr)*);
        $crate::__operations!(@list $list [$($done)* $name] $($rest)*);
    };
    (@verb get) => { $crate::wire::Verb::Get };
    (@verb put) => { $crate::wire::Verb::Put };
    (@verb post) => { $crate::wire::Verb::Post };
    (@verb patch) => { $crate::wire::Verb::Patch };
    (@verb delete) => { $crate::wire::Verb::Delete };
    (@op [$($doc:tt)*] $name:ident $id:ident $verb:ident $path:literal $group:ident
        [$($body:tt)*] $req:ty; $resp:ty; $($attr:tt)*
    ) => {
        $($doc)*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl $crate::wire::Operation for $name {
            const ID: &'static str = stringify!($id);
            const VERB: $crate::wire::Verb = $crate::__operations!(@verb $verb);
            const PATH: &'static str = $path;
            const GROUP: $crate::wire::Group = $crate::wire::Group::$group;
            type Request = $req;
            type Response = $resp;
            const INFO: $crate::wire::OperationInfo = $crate::wire::OperationInfo::new(
                stringify!($id),
                $crate::__operations!(@verb $verb),
                $path,
                $crate::wire::Group::$group,
                || {
                    let mut op = <$name as utoipa::Path>::operation();
                    op.tags
                        .get_or_insert_with(Vec::new)
                        .extend(<$name as utoipa::__dev::Tags>::tags().into_iter().map(str::to_owned));
                    op
                },
                <$name as utoipa::__dev::SchemaReferences>::schemas,
            );
        }

        const _: () = {
            $($doc)*
            #[utoipa::path($verb, path = $crate::wire::openapi_path($path),
                operation_id = stringify!($id), impl_for = $name, $($body)* $($attr)*)]
            #[allow(dead_code)]
            fn $id() {}
        };
    };
    ($list:ident; $($rest:tt)*) => {
        $crate::__operations!(@list $list [] $($rest)*);
    };
}

pub use crate::__operations as operations;

operations! { META_OPERATIONS;
    /// Liveness.
    Healthz = healthz: get "/healthz" in Meta, none => String {
        tag = "meta", responses((status = 200, description = "The server is up", body = String))
    }
    /// This server's document.
    ///
    /// The operations its configuration serves and the names it takes: a
    /// server over embedded storage serves no direct uploads, and a
    /// compaction's summarizers are the ones it has. With `all`, the whole
    /// contract, which the clients are generated from.
    OpenapiJson = openapi_json: get "/v1/openapi.json" in Meta, none => serde_json::Value {
        tag = "meta",
            params(("all" = Option<bool>, Query,
                description = "The whole contract, every operation of every configuration (default: false, this server's own)")),
            responses((status = 200, description = "The OpenAPI 3.1 document"),
                (status = 400, description = "An `all` that is not true or false", body = crate::wire::ErrorBody))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_a_suffix_after_a_greedy_name_is_routed_on_its_prefix() {
        let evict = by_id("evict_ref").expect("declared");
        assert_eq!(evict.route_path(), "/v1/refs/{*name}");
        assert_eq!(evict.suffix(), Some("/evict"));
        assert_eq!(evict.openapi_path(), "/v1/refs/{name}/evict");
        let get = by_id("get_ref").expect("declared");
        assert_eq!(get.route_path(), get.path);
        assert_eq!(get.suffix(), None);
        let file = by_id("get_file").expect("declared");
        assert_eq!(file.path_params().collect::<Vec<_>>(), ["ws", "path"]);
    }

    #[test]
    fn every_operation_is_declared_once() {
        let mut ids = std::collections::BTreeSet::new();
        let mut routes = std::collections::BTreeSet::new();
        for op in all() {
            assert!(ids.insert(op.id), "{} is declared twice", op.id);
            assert!(
                routes.insert((op.verb, op.openapi_path())),
                "{op:?} is declared twice"
            );
            assert_eq!(op.document().operation_id.as_deref(), Some(op.id));
        }
    }
}
