//! Every AWS call a function makes, as the IAM request it is: the record
//! the IAM test (`functions/common/tests/iam.rs`, evaluated by
//! `tests/iam/evaluate.mjs` against template.yaml) is built from. Compiled
//! only for tests and with the `conformance` feature.
//!
//! [`CallLog::install`] puts one interceptor on every SDK client the
//! process builds from then on (S3, DynamoDB, Step Functions, Bedrock);
//! [`as_function`] names the function a call is made for (a task-local, so
//! a call made outside it is recorded under [`UNATTRIBUTED`] and fails the
//! evaluation). Each call becomes one [`IamCall`] per IAM action it needs:
//! a TransactWriteItems is one `PutItem`, `UpdateItem`, `DeleteItem` or
//! `ConditionCheckItem` per action, a DeleteObjects one `DeleteObject` per
//! key, a Query on an index names the index's ARN. An operation this file
//! has no rule for is recorded with the action `unmapped:<service>:<op>`,
//! which the evaluation refuses: a new kind of call must be mapped first.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde::Serialize;
use serde_json::Value;

/// The region every recorded ARN names (the emulator's).
pub const REGION: &str = "us-east-1";
/// The account every recorded ARN names (the emulator's).
pub const ACCOUNT: &str = "123456789012";
/// The function of a call made outside [`as_function`].
pub const UNATTRIBUTED: &str = "(no function)";

tokio::task_local! {
    static FUNCTION: &'static str;
}

/// Runs `fut` as `function`: every AWS call it makes is recorded as that
/// function's.
pub async fn as_function<F: std::future::Future>(function: &'static str, fut: F) -> F::Output {
    FUNCTION.scope(function, fut).await
}

/// One IAM request: who asked, for what, on what.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct IamCall {
    /// The function ([`as_function`]), or [`UNATTRIBUTED`].
    pub function: String,
    /// The SDK operation, `service:Operation` (e.g. `dynamodb:TransactWriteItems`).
    pub operation: String,
    /// The IAM action (e.g. `dynamodb:ConditionCheckItem`).
    pub action: String,
    /// The resource's ARN.
    pub resource: String,
    /// Condition keys the request carries (`s3:prefix` of a listing).
    pub context: BTreeMap<String, String>,
}

/// The calls recorded since [`CallLog::install`].
#[derive(Debug, Clone, Default)]
pub struct CallLog {
    calls: Arc<Mutex<Vec<IamCall>>>,
}

static INSTALLED: OnceLock<CallLog> = OnceLock::new();

impl CallLog {
    /// Records every call of every SDK client built from now on in this
    /// process; a second install returns the same log.
    pub fn install() -> CallLog {
        INSTALLED.get_or_init(CallLog::default).clone()
    }

    /// The interceptor to put on a client being built, when a log is
    /// installed.
    pub fn interceptor() -> Option<SharedInterceptor> {
        INSTALLED.get().map(|l| SharedInterceptor::new(l.clone()))
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<IamCall> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn push(&self, calls: impl IntoIterator<Item = IamCall>) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(calls);
    }
}

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "ctx-iam-call-log"
    }

    // Before signing: the endpoint is resolved (the bucket is in the URI)
    // and presigned requests get here too. Once per attempt; the
    // evaluation counts distinct calls.
    fn read_before_signing(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(m) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let req = context.request();
        let function = FUNCTION.try_with(|f| *f).unwrap_or(UNATTRIBUTED);
        let request = Request {
            uri: req.uri(),
            copy_source: req.headers().get("x-amz-copy-source"),
            body: req.body().bytes().unwrap_or_default(),
        };
        let service = m.service().to_ascii_lowercase();
        self.push(needs(&service, m.name(), &request).into_iter().map(
            |(action, resource, context)| IamCall {
                function: function.to_owned(),
                operation: format!("{service}:{}", m.name()),
                action,
                resource,
                context,
            },
        ));
        Ok(())
    }
}

/// What a call's IAM evaluation reads of its HTTP request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The whole URI, endpoint resolved.
    pub uri: &'a str,
    /// `x-amz-copy-source` (CopyObject).
    pub copy_source: Option<&'a str>,
    /// The body, when it is in memory.
    pub body: &'a [u8],
}

type Need = (String, String, BTreeMap<String, String>);

fn need(action: &str, resource: String) -> Need {
    (action.to_owned(), resource, BTreeMap::new())
}

fn unmapped(service: &str, op: &str) -> Vec<Need> {
    vec![need(&format!("unmapped:{service}:{op}"), "*".to_owned())]
}

/// The IAM actions and resources a call of `op` on `service` needs.
pub fn needs(service: &str, op: &str, req: &Request<'_>) -> Vec<Need> {
    match service {
        "dynamodb" => dynamodb(op, req),
        "s3" => s3(op, req),
        "sfn" => sfn(op, req),
        "bedrock runtime" | "bedrockruntime" | "bedrock-runtime" => bedrock(op, req),
        _ => unmapped(service, op),
    }
}

fn table_arn(table: &str) -> String {
    format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}")
}

fn dynamodb(op: &str, req: &Request<'_>) -> Vec<Need> {
    let body: Value = serde_json::from_slice(req.body).unwrap_or(Value::Null);
    let table = |v: &Value| v["TableName"].as_str().map(table_arn);
    match op {
        "GetItem" | "PutItem" | "UpdateItem" | "DeleteItem" | "Scan" | "Query"
        | "DescribeTable" => {
            let Some(t) = table(&body) else {
                return unmapped("dynamodb", op);
            };
            let resource = match body["IndexName"].as_str() {
                Some(index) => format!("{t}/index/{index}"),
                None => t,
            };
            vec![need(&format!("dynamodb:{op}"), resource)]
        }
        "TransactWriteItems" | "TransactGetItems" => body["TransactItems"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .flat_map(|item| item.as_object().into_iter().flatten())
                    .map(|(kind, action)| {
                        let iam = match kind.as_str() {
                            "Put" => "dynamodb:PutItem",
                            "Update" => "dynamodb:UpdateItem",
                            "Delete" => "dynamodb:DeleteItem",
                            "ConditionCheck" => "dynamodb:ConditionCheckItem",
                            "Get" => "dynamodb:GetItem",
                            _ => "unmapped:dynamodb:TransactItem",
                        };
                        need(iam, table(action).unwrap_or_else(|| "*".to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_else(|| unmapped("dynamodb", op)),
        "BatchGetItem" | "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .map(|tables| {
                tables
                    .keys()
                    .map(|t| need(&format!("dynamodb:{op}"), table_arn(t)))
                    .collect()
            })
            .unwrap_or_else(|| unmapped("dynamodb", op)),
        _ => unmapped("dynamodb", op),
    }
}

/// Path-style S3 (the emulator's): `/<bucket>/<key>?<query>`.
fn s3_parts(uri: &str) -> (String, String, BTreeMap<String, String>) {
    let after_scheme = uri.split_once("://").map_or(uri, |(_, r)| r);
    let path_and_query = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let path = path.trim_start_matches('/');
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    (decode(bucket), decode(key), query)
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn object_arn(bucket: &str, key: &str) -> String {
    format!("arn:aws:s3:::{bucket}/{key}")
}

fn s3(op: &str, req: &Request<'_>) -> Vec<Need> {
    let (bucket, key, query) = s3_parts(req.uri);
    let object = object_arn(&bucket, &key);
    let versioned = query.contains_key("versionId");
    let one = |action: &str| vec![need(action, object.clone())];
    let listing = |action: &str| {
        let mut context = BTreeMap::new();
        if let Some(p) = query.get("prefix") {
            context.insert("s3:prefix".to_owned(), p.clone());
        }
        vec![(action.to_owned(), format!("arn:aws:s3:::{bucket}"), context)]
    };
    match op {
        "GetObject" | "HeadObject" if versioned => one("s3:GetObjectVersion"),
        "GetObject" | "HeadObject" => one("s3:GetObject"),
        "PutObject" | "CreateMultipartUpload" | "UploadPart" | "CompleteMultipartUpload" => {
            one("s3:PutObject")
        }
        "AbortMultipartUpload" => one("s3:AbortMultipartUpload"),
        "DeleteObject" if versioned => one("s3:DeleteObjectVersion"),
        "DeleteObject" => one("s3:DeleteObject"),
        "ListObjectsV2" | "ListObjects" | "HeadBucket" => listing("s3:ListBucket"),
        "ListObjectVersions" => listing("s3:ListBucketVersions"),
        "CopyObject" => {
            let mut out = one("s3:PutObject");
            if let Some(src) = req.copy_source {
                let src = decode(src.trim_start_matches('/'));
                let (src, version) = src.split_once("?versionId=").unwrap_or((&src, ""));
                let action = if version.is_empty() {
                    "s3:GetObject"
                } else {
                    "s3:GetObjectVersion"
                };
                out.push(need(action, format!("arn:aws:s3:::{src}")));
            }
            out
        }
        "DeleteObjects" => delete_objects(&bucket, req.body),
        _ => unmapped("s3", op),
    }
}

/// DeleteObjects' XML body: one `<Object><Key>…</Key>[<VersionId>…]`
/// per key.
fn delete_objects(bucket: &str, body: &[u8]) -> Vec<Need> {
    let body = String::from_utf8_lossy(body);
    let tag = |s: &str, name: &str| -> Option<String> {
        let open = format!("<{name}>");
        let start = s.find(&open)? + open.len();
        let end = s[start..].find(&format!("</{name}>"))? + start;
        Some(unescape(&s[start..end]))
    };
    let out: Vec<Need> = body
        .split("<Object>")
        .skip(1)
        .filter_map(|o| {
            let key = tag(o, "Key")?;
            let action = if tag(o, "VersionId").is_some() {
                "s3:DeleteObjectVersion"
            } else {
                "s3:DeleteObject"
            };
            Some(need(action, object_arn(bucket, &key)))
        })
        .collect();
    if out.is_empty() {
        unmapped("s3", "DeleteObjects")
    } else {
        out
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn sfn(op: &str, req: &Request<'_>) -> Vec<Need> {
    let body: Value = serde_json::from_slice(req.body).unwrap_or(Value::Null);
    let arn = |field: &str| body[field].as_str().map(str::to_owned);
    let resource = match op {
        "StartExecution" => arn("stateMachineArn"),
        "StopExecution" | "DescribeExecution" | "GetExecutionHistory" => arn("executionArn"),
        _ => None,
    };
    match resource {
        Some(r) => vec![need(&format!("states:{op}"), r)],
        None => unmapped("sfn", op),
    }
}

fn bedrock(op: &str, req: &Request<'_>) -> Vec<Need> {
    // `/model/{modelId}/converse` and `/model/{modelId}/invoke`: Converse
    // is authorized as InvokeModel.
    let (_, path, _) = s3_parts(req.uri);
    let model = path.split('/').next().unwrap_or_default();
    match op {
        "Converse" | "InvokeModel" if !model.is_empty() => vec![need(
            "bedrock:InvokeModel",
            format!("arn:aws:bedrock:{REGION}::foundation-model/{model}"),
        )],
        "ConverseStream" | "InvokeModelWithResponseStream" if !model.is_empty() => vec![need(
            "bedrock:InvokeModelWithResponseStream",
            format!("arn:aws:bedrock:{REGION}::foundation-model/{model}"),
        )],
        _ => unmapped("bedrock", op),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(uri: &'a str, body: &'a [u8]) -> Request<'a> {
        Request {
            uri,
            copy_source: None,
            body,
        }
    }

    #[test]
    fn a_transaction_needs_each_action_by_its_kind() {
        let body = br#"{"TransactItems":[
            {"Put":{"TableName":"t","Item":{}}},
            {"ConditionCheck":{"TableName":"t","Key":{}}},
            {"Update":{"TableName":"t","Key":{}}},
            {"Delete":{"TableName":"u","Key":{}}}]}"#;
        let got: Vec<String> = needs("dynamodb", "TransactWriteItems", &req("http://h/", body))
            .into_iter()
            .map(|(a, r, _)| format!("{a} {r}"))
            .collect();
        let t = table_arn("t");
        assert_eq!(
            got,
            [
                format!("dynamodb:PutItem {t}"),
                format!("dynamodb:ConditionCheckItem {t}"),
                format!("dynamodb:UpdateItem {t}"),
                format!("dynamodb:DeleteItem {}", table_arn("u")),
            ]
        );
    }

    #[test]
    fn a_query_on_an_index_names_the_index() {
        let body = br#"{"TableName":"t","IndexName":"missing_summary"}"#;
        let got = needs("dynamodb", "Query", &req("http://h/", body));
        assert_eq!(
            got[0].1,
            format!("{}/index/missing_summary", table_arn("t"))
        );
    }

    #[test]
    fn s3_calls_name_object_bucket_prefix_and_versions() {
        let get = needs(
            "s3",
            "GetObject",
            &req("http://127.0.0.1:5000/b/t/x/art-1?x-id=GetObject", b""),
        );
        assert_eq!(get[0].0, "s3:GetObject");
        assert_eq!(get[0].1, "arn:aws:s3:::b/t/x/art-1");
        let list = needs(
            "s3",
            "ListObjectsV2",
            &req("http://127.0.0.1:5000/b?list-type=2&prefix=t%2Fx%2F", b""),
        );
        assert_eq!(list[0].0, "s3:ListBucket");
        assert_eq!(list[0].1, "arn:aws:s3:::b");
        assert_eq!(list[0].2["s3:prefix"], "t/x/");
        let del = needs(
            "s3",
            "DeleteObject",
            &req("http://h/b/k?versionId=v1&x-id=DeleteObject", b""),
        );
        assert_eq!(del[0].0, "s3:DeleteObjectVersion");
        let many = needs(
            "s3",
            "DeleteObjects",
            &req(
                "http://h/b?delete",
                b"<Delete><Object><Key>a&amp;b</Key></Object><Object><Key>c</Key><VersionId>v</VersionId></Object></Delete>",
            ),
        );
        assert_eq!(
            many,
            [
                need("s3:DeleteObject", "arn:aws:s3:::b/a&b".into()),
                need("s3:DeleteObjectVersion", "arn:aws:s3:::b/c".into()),
            ]
        );
    }

    #[test]
    fn an_operation_without_a_rule_is_unmapped() {
        let got = needs("s3", "PutBucketPolicy", &req("http://h/b?policy", b""));
        assert_eq!(got[0].0, "unmapped:s3:PutBucketPolicy");
    }
}
