//! Tests of [`super`].
use super::*;

fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

#[test]
fn no_variables_give_the_defaults() {
    assert_eq!(Config::from_vars(vars(&[])).unwrap(), Config::default());
}

#[test]
fn the_documented_defaults_are_the_defaults() {
    let c = Config::default();
    let branching = &c.branching;
    let numeric = [
        ("CTX_BRANCH_MAX_DEPTH", u64::from(branching.max_depth)),
        (
            "CTX_BRANCH_MAX_PER_SESSION",
            u64::from(branching.limits.active_per_session),
        ),
        (
            "CTX_BRANCH_MAX_PER_TENANT",
            u64::from(branching.limits.active_per_tenant),
        ),
        (
            "CTX_BRANCH_CREATES_PER_MINUTE",
            u64::from(branching.limits.creations_per_minute),
        ),
        (
            "CTX_SESSION_END_TIMEOUT_SECS",
            branching.session_end_timeout.as_secs(),
        ),
        (
            "CTX_SESSION_IDLE_SECS",
            branching.session_idle.map_or(0, |d| d.as_secs()),
        ),
        (
            "CTX_MAX_CONNECTIONS",
            c.server.max_connections.try_into().unwrap(),
        ),
        (
            "CTX_HEADER_READ_TIMEOUT_SECS",
            c.server.header_read_timeout.as_secs(),
        ),
        ("CTX_IDLE_TIMEOUT_SECS", c.server.idle_timeout.as_secs()),
        (
            "CTX_BODY_READ_TIMEOUT_SECS",
            c.server.body_read_timeout.as_secs(),
        ),
        ("CTX_MAX_IN_FLIGHT_BYTES", c.server.max_in_flight_bytes),
        (
            "CTX_MAX_ARTIFACT_BYTES",
            c.max_artifact_bytes.try_into().unwrap(),
        ),
        (
            "CTX_INLINE_DELTA_BYTES",
            c.inline_delta_bytes.try_into().unwrap(),
        ),
        (
            "CTX_DYNAMODB_INLINE_DELTA_BYTES",
            c.dynamodb_inline_delta_bytes.try_into().unwrap(),
        ),
        ("CTX_DOWNLOAD_URL_BYTES", c.download_url_bytes),
        ("CTX_BACKUP_RETENTION_DAYS", c.backup_retention_days),
        (
            "CTX_SUMMARIZER_TIMEOUT_SECS",
            c.summarizer.timeout.as_secs(),
        ),
        ("CTX_SUMMARIZER_RETRIES", c.summarizer.retries.into()),
        (
            "CTX_SUMMARIZER_MAX_INPUT_TOKENS",
            c.summarizer.max_input_tokens,
        ),
    ];
    let default_of = |var: &str| {
        SETTINGS
            .iter()
            .find(|s| s.var == var)
            .unwrap_or_else(|| panic!("{var} is documented"))
            .default
            .trim_matches('`')
    };
    for (var, value) in numeric {
        assert_eq!(default_of(var), value.to_string(), "{var}");
    }
    assert_eq!(default_of("CTX_DATA"), c.data.to_str().unwrap());
    assert_eq!(default_of("CTX_ADDR"), c.addr.to_string());
    assert_eq!(default_of("CTX_TENANT_CLAIM"), c.tenant_claim);
    assert_eq!(default_of("CTX_SESSION_VALIDATION"), "strict");
    assert_eq!(default_of("CTX_SUMMARIZE_EVERY"), "off");
    assert_eq!(c.summarize_every, None);
    assert_eq!(
        crate::config::parse_interval("CTX_SUMMARIZE_EVERY", "off").unwrap(),
        None
    );
    assert_eq!(branching.validation, Validation::Strict);
    assert_eq!(default_of("CTX_SUMMARIZER"), c.summarizer.kind.as_str());
    assert!(
        default_of("CTX_SUMMARIZER_URL").contains(&format!("{DEFAULT_OPENAI_URL}` (openai)"))
            && default_of("CTX_SUMMARIZER_URL")
                .contains(&format!("`{DEFAULT_ANTHROPIC_URL}` (anthropic)"))
    );
}

fn summarizer(pairs: &'static [(&'static str, &'static str)]) -> Result<SummarizerConfig> {
    Config::from_vars(vars(pairs)).map(|c| c.summarizer)
}

#[test]
fn each_summarizer_backend_gets_its_default_url() {
    let openai = summarizer(&[
        ("CTX_SUMMARIZER", "openai"),
        ("CTX_SUMMARIZER_MODEL", "gpt-4o-mini"),
        ("CTX_SUMMARIZER_API_KEY", "sk-x"),
    ])
    .unwrap();
    assert_eq!(openai.url, DEFAULT_OPENAI_URL);
    let anthropic = summarizer(&[
        ("CTX_SUMMARIZER", "anthropic"),
        ("CTX_SUMMARIZER_MODEL", "claude-haiku-4-5"),
        ("CTX_SUMMARIZER_API_KEY", "sk-ant-x"),
    ])
    .unwrap();
    assert_eq!(anthropic.url, DEFAULT_ANTHROPIC_URL);
    // A local OpenAI-compatible server (Ollama) needs no key.
    let ollama = summarizer(&[
        ("CTX_SUMMARIZER", "openai"),
        ("CTX_SUMMARIZER_URL", "http://127.0.0.1:11434/v1"),
        ("CTX_SUMMARIZER_MODEL", "llama3.2"),
    ])
    .unwrap();
    assert_eq!(ollama.api_key, None);
    let bedrock = summarizer(&[
        ("CTX_SUMMARIZER", "bedrock"),
        (
            "CTX_SUMMARIZER_MODEL",
            "anthropic.claude-3-haiku-20240307-v1:0",
        ),
    ])
    .unwrap();
    assert_eq!(bedrock.kind, SummarizerKind::Bedrock);
    assert_eq!(bedrock.api_key, None);
}

#[test]
fn a_summarizer_missing_its_model_or_key_names_the_variable() {
    for (pairs, var) in [
        (
            &[
                ("CTX_SUMMARIZER", "openai"),
                ("CTX_SUMMARIZER_API_KEY", "k"),
            ][..],
            "CTX_SUMMARIZER_MODEL",
        ),
        (&[("CTX_SUMMARIZER", "bedrock")][..], "CTX_SUMMARIZER_MODEL"),
        (
            &[("CTX_SUMMARIZER", "openai"), ("CTX_SUMMARIZER_MODEL", "m")][..],
            "CTX_SUMMARIZER_API_KEY",
        ),
        (
            &[
                ("CTX_SUMMARIZER", "openai"),
                ("CTX_SUMMARIZER_URL", "https://api.openai.com/v1/"),
                ("CTX_SUMMARIZER_MODEL", "m"),
            ][..],
            "CTX_SUMMARIZER_API_KEY",
        ),
        (
            &[
                ("CTX_SUMMARIZER", "anthropic"),
                ("CTX_SUMMARIZER_URL", "http://127.0.0.1:9"),
                ("CTX_SUMMARIZER_MODEL", "m"),
            ][..],
            "CTX_SUMMARIZER_API_KEY",
        ),
    ] {
        let pairs: &'static [(&'static str, &'static str)] = pairs;
        let e = summarizer(pairs).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Invalid, "{pairs:?}");
        assert_eq!(e.field.as_deref(), Some(var), "{pairs:?}: {}", e.message);
        assert!(e.message.contains(var), "{}", e.message);
    }
}

#[test]
fn the_summarizer_key_never_shows_in_debug() {
    let c = Config::from_vars(vars(&[
        ("CTX_SUMMARIZER", "anthropic"),
        ("CTX_SUMMARIZER_MODEL", "m"),
        ("CTX_SUMMARIZER_API_KEY", "sk-ant-very-secret"),
    ]))
    .unwrap();
    let shown = format!("{c:?} {:#?}", c.summarizer);
    assert!(!shown.contains("sk-ant-very-secret"), "{shown}");
    assert_eq!(c.summarizer.api_key.unwrap().expose(), "sk-ant-very-secret");
}

#[test]
fn every_setting_is_read() {
    let all = Config::from_vars(|name| {
        Some(
            match name {
                "CTX_DATA" => "/srv/ctx",
                "CTX_ADDR" => "0.0.0.0:9",
                "CTX_BUCKET" => "b",
                "CTX_TABLE" => "t",
                "CTX_S3_PATH_STYLE" => "true",
                "CTX_BRANCH_TIMER_ARN" => "arn:timer",
                "CTX_TENANT_CLAIM" => "org",
                "CTX_LOG" => "debug",
                "OTEL_EXPORTER_OTLP_ENDPOINT" => "http://127.0.0.1:4318",
                "CTX_SESSION_VALIDATION" => "permissive",
                "CTX_SUMMARIZER" => "openai",
                "CTX_SUMMARIZER_URL" => "http://127.0.0.1:11434/v1/",
                "CTX_SUMMARIZER_MODEL" => "llama3.2",
                "CTX_SUMMARIZER_API_KEY" => "sk-local",
                "CTX_SUMMARIZER_MAX_INPUT_TOKENS" => "4000",
                "CTX_SUMMARIZE_EVERY" => "7m",
                "CTX_RETENTION_DAYS" => "7,acme=0",
                "CTX_RETENTION_EVERY" => "7h",
                "CTX_MEMORY_EXTRACT" => "false",
                "CTX_MEMORY_INJECTION_RATIO" | "CTX_MEMORY_MIN_CONFIDENCE" => "0.7",
                "CTX_MEMORY_INJECTION_GUARD" => "log",
                "AWS_ENDPOINT_URL" => return None,
                _ => "7",
            }
            .to_owned(),
        )
    })
    .unwrap();
    let branching = BranchConfig {
        max_depth: 7,
        limits: crate::branch::RateLimits {
            active_per_session: 7,
            active_per_tenant: 7,
            creations_per_minute: 7,
        },
        session_end_timeout: Duration::from_secs(7),
        session_idle: Some(Duration::from_secs(7)),
        validation: Validation::Permissive,
        memory: crate::branch::memories::MemoryConfig {
            extract: false,
            injection_ratio: 0.7,
            max_items: 7,
            min_confidence: 0.7,
            guard: crate::branch::memories::Guard::Log,
        },
        ..BranchConfig::default()
    };
    assert_eq!(
        all,
        Config {
            data: "/srv/ctx".into(),
            addr: "0.0.0.0:9".parse().unwrap(),
            store: StoreKind::Local,
            bucket: Some("b".into()),
            table: Some("t".into()),
            s3_path_style: true,
            branch_timer_arn: Some("arn:timer".into()),
            tenant_claim: "org".into(),
            log: Some("debug".into()),
            otlp_endpoint: Some("http://127.0.0.1:4318".into()),
            summarize_every: Some(Duration::from_secs(420)),
            retention: crate::config::Retention {
                keep_days: 7,
                per_tenant: [("acme".parse().unwrap(), 0)].into_iter().collect(),
                every: Some(Duration::from_secs(7 * 3600)),
            },
            branching,
            max_artifact_bytes: 7,
            inline_delta_bytes: 7,
            dynamodb_inline_delta_bytes: 7,
            download_url_bytes: 7,
            backup_retention_days: 7,
            cache_bytes: 7,
            hot_cache_bytes: 7,
            gc_grace: Duration::from_secs(7),
            server: ServerLimits {
                max_connections: 7,
                header_read_timeout: Duration::from_secs(7),
                idle_timeout: Duration::from_secs(7),
                body_read_timeout: Duration::from_secs(7),
                max_in_flight_bytes: 7,
            },
            summarizer: SummarizerConfig {
                kind: SummarizerKind::OpenAi,
                url: "http://127.0.0.1:11434/v1".into(),
                model: "llama3.2".into(),
                api_key: Some(Secret::new("sk-local")),
                timeout: Duration::from_secs(7),
                retries: 7,
                max_input_tokens: 4000,
                ..SummarizerConfig::default()
            },
        }
    );
}

#[test]
fn every_setting_has_a_reader_and_no_harness_variable_has_one() {
    for s in SETTINGS {
        assert!(s.read.is_some(), "{s} is not read");
        assert_eq!(s.to_string(), s.var);
    }
    for s in HARNESS {
        assert!(s.read.is_none(), "{s} is read into the Config");
    }
    let mut names: Vec<&str> = SETTINGS.iter().chain(HARNESS).map(|s| s.var).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        SETTINGS.len() + HARNESS.len(),
        "a name is declared twice"
    );
    // ctx's own, and the one standard variable it reads as a setting
    // (OpenTelemetry's, whose SDK reads its other variables itself).
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("CTX_") || *n == OTEL_EXPORTER_OTLP_ENDPOINT.var),
        "{names:?}"
    );
    assert_eq!(CTX_SESSION_VALIDATION.long(), "session-validation");
}

#[test]
fn a_bad_value_is_an_error_naming_its_variable() {
    for (var, value) in [
        ("CTX_ADDR", "localhost"),
        ("CTX_BRANCH_MAX_DEPTH", "three"),
        ("CTX_BRANCH_MAX_PER_SESSION", "-1"),
        ("CTX_BRANCH_MAX_PER_TENANT", "1e3"),
        ("CTX_BRANCH_CREATES_PER_MINUTE", "5/min"),
        ("CTX_SESSION_END_TIMEOUT_SECS", "30s"),
        ("CTX_SESSION_VALIDATION", "loose"),
        ("CTX_S3_PATH_STYLE", "yes"),
        ("CTX_MAX_CONNECTIONS", "many"),
        ("CTX_HEADER_READ_TIMEOUT_SECS", "5m"),
        ("CTX_IDLE_TIMEOUT_SECS", "-2"),
        ("CTX_BODY_READ_TIMEOUT_SECS", "1.5"),
        ("CTX_MAX_IN_FLIGHT_BYTES", "256MiB"),
        ("CTX_MAX_ARTIFACT_BYTES", "64MiB"),
        ("CTX_INLINE_DELTA_BYTES", "16KiB"),
        ("CTX_DOWNLOAD_URL_BYTES", "4MiB"),
        ("CTX_BACKUP_RETENTION_DAYS", "35d"),
        ("CTX_INLINE_DELTA_BYTES", "262145"),
        ("CTX_DYNAMODB_INLINE_DELTA_BYTES", "1KiB"),
        ("CTX_DYNAMODB_INLINE_DELTA_BYTES", "262145"),
        ("CTX_SUMMARIZER", "gpt"),
        ("CTX_SUMMARIZER_URL", "localhost:11434"),
        ("CTX_SUMMARIZER_TIMEOUT_SECS", "1m"),
        ("CTX_SUMMARIZER_TIMEOUT_SECS", "0"),
        ("CTX_SUMMARIZER_RETRIES", "-1"),
        ("CTX_SUMMARIZER_MAX_INPUT_TOKENS", "10"),
        ("CTX_SUMMARIZE_EVERY", "5"),
        ("CTX_SUMMARIZE_EVERY", "0s"),
        ("CTX_SUMMARIZE_EVERY", "1.5m"),
        ("CTX_SUMMARIZE_EVERY", "8d"),
        ("CTX_SUMMARIZE_EVERY", "5 minutes"),
        ("CTX_RETENTION_DAYS", "seven"),
        ("CTX_RETENTION_DAYS", "7,acme"),
        ("CTX_RETENTION_DAYS", "7,acme=-1"),
        ("CTX_RETENTION_DAYS", "7,a b=1"),
        ("CTX_RETENTION_EVERY", "5"),
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://collector.example:4318",
        ),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"),
    ] {
        let e = Config::from_vars(|n| (n == var).then(|| value.to_owned())).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Invalid, "{var}");
        assert_eq!(e.field.as_deref(), Some(var), "{var}: {}", e.message);
        assert!(e.message.contains(value), "{var}: {}", e.message);
    }
}

#[test]
fn empty_values_count_as_unset() {
    let c = Config::from_vars(|_| Some(String::new())).unwrap();
    assert_eq!(c, Config::default());
}

#[test]
fn the_flag_of_session_validation_is_named_in_its_error() {
    let e = Config::parse_validation("--session-validation", "loose").unwrap_err();
    assert_eq!(e.field.as_deref(), Some("--session-validation"));
    assert_eq!(
        Config::parse_validation("--session-validation", "permissive").unwrap(),
        Validation::Permissive
    );
}

#[cfg(feature = "aws")]
#[test]
fn the_aws_store_names_what_is_missing_and_emulators_get_path_style() {
    use crate::store::aws::AwsConfig;
    let e = Config::from_vars(vars(&[("CTX_TABLE", "t")]))
        .unwrap()
        .aws()
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("CTX_BUCKET"));
    let e = Config::from_vars(vars(&[("CTX_BUCKET", "b"), ("CTX_TABLE", "")]))
        .unwrap()
        .aws()
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("CTX_TABLE"));
    let real = Config::from_vars(vars(&[("CTX_BUCKET", "b"), ("CTX_TABLE", "t")]))
        .unwrap()
        .aws()
        .unwrap();
    assert_eq!(
        real,
        AwsConfig {
            bucket: "b".into(),
            table: "t".into(),
            path_style: false
        }
    );
    let emulated = vars(&[
        ("CTX_BUCKET", "b"),
        ("CTX_TABLE", "t"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
    ]);
    assert!(
        Config::from_vars(emulated)
            .unwrap()
            .aws()
            .unwrap()
            .path_style,
        "emulators get path-style S3"
    );
    let forced = vars(&[
        ("CTX_BUCKET", "b"),
        ("CTX_TABLE", "t"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
        ("CTX_S3_PATH_STYLE", "false"),
    ]);
    assert!(!Config::from_vars(forced).unwrap().aws().unwrap().path_style);
}

/// The one Config table, in docs/config.md: one row per variable,
/// `| `VAR` | …`, whose flag and default are the ones documented here.
#[test]
fn the_config_guide_table_lists_every_setting() {
    let rows: Vec<&str> = CONFIG_GUIDE
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    for s in SETTINGS.iter().chain(HARNESS) {
        let row = rows
            .iter()
            .find(|r| r.starts_with(&format!("| `{}` |", s.var)))
            .unwrap_or_else(|| panic!("docs/config.md's table has no row for {}", s.var));
        if let Some(flag) = s.flag {
            assert!(
                row.contains(&format!("| `{flag}` |")),
                "docs/config.md's flag of {} is not {flag}: {row}",
                s.var
            );
        }
        assert!(
            row.contains(&format!("| {} |", s.default)),
            "docs/config.md's default of {} is not {:?}: {row}",
            s.var,
            s.default
        );
    }
}

/// The Config guide, and the README and the other guides, which must not
/// hold a second table of settings.
const CONFIG_GUIDE: &str = include_str!("../../../docs/config.md");
const OTHER_DOCS: &[(&str, &str)] = &[
    ("README.md", include_str!("../../../README.md")),
    ("docs/aws.md", include_str!("../../../docs/aws.md")),
    ("docs/bench.md", include_str!("../../../docs/bench.md")),
    ("docs/cli.md", include_str!("../../../docs/cli.md")),
    ("docs/cost.md", include_str!("../../../docs/cost.md")),
    ("docs/folding.md", include_str!("../../../docs/folding.md")),
    ("docs/formats.md", include_str!("../../../docs/formats.md")),
    ("docs/iam.md", include_str!("../../../docs/iam.md")),
    (
        "docs/requirements.md",
        include_str!("../../../docs/requirements.md"),
    ),
    (
        "docs/http-api.md",
        include_str!("../../../docs/http-api.md"),
    ),
    (
        "docs/architecture.md",
        include_str!("../../../docs/architecture.md"),
    ),
    (
        "docs/lifecycle.md",
        include_str!("../../../docs/lifecycle.md"),
    ),
    (
        "docs/summaries.md",
        include_str!("../../../docs/summaries.md"),
    ),
    (
        "docs/workspaces.md",
        include_str!("../../../docs/workspaces.md"),
    ),
    (
        "docs/telemetry.md",
        include_str!("../../../docs/telemetry.md"),
    ),
];

/// The README and every guide in docs/: each `CTX_` name they mention is
/// a known variable, and only docs/config.md has a row of settings.
#[test]
fn the_docs_mention_only_settings_and_hold_one_config_table() {
    let known: Vec<&str> = SETTINGS
        .iter()
        .chain(HARNESS)
        .map(|s| s.var)
        .chain(CLIENT_VARS.iter().copied())
        .collect();
    let listed: Vec<String> = OTHER_DOCS
        .iter()
        .map(|(p, _)| (*p).to_owned())
        .chain(["docs/config.md".to_owned()])
        .collect();
    for e in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let path = format!("docs/{name}");
        assert!(
            !name.ends_with(".md") || listed.contains(&path),
            "{path} is not checked here: add it to OTHER_DOCS"
        );
    }
    for (path, text) in OTHER_DOCS.iter().chain([&("docs/config.md", CONFIG_GUIDE)]) {
        let mut rest = *text;
        while let Some(i) = rest.find("CTX_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            assert!(
                name == "CTX_" || known.contains(&name.as_str()),
                "{path} mentions {name}, which is no setting"
            );
            rest = &rest[i + name.len()..];
        }
    }
    for (path, text) in OTHER_DOCS {
        assert!(
            !text.lines().any(|l| l.starts_with("| `CTX_")),
            "{path} has a row of settings: the one Config table is docs/config.md's"
        );
    }
}

/// The client commands' variables, read by their flags (not settings of
/// a server, so not in [`Config`]).
const CLIENT_VARS: &[&str] = &[
    "CTX_SERVER",
    "CTX_TOKEN",
    "CTX_PRINCIPAL",
    "CTX_TEMPLATE",
    "CTX_SESSION",
];

#[test]
fn the_aws_store_takes_its_own_inline_limit() {
    let mut c = Config {
        inline_delta_bytes: 16_384,
        dynamodb_inline_delta_bytes: 768,
        ..Config::default()
    };
    for (store, limit) in [
        (StoreKind::Local, 16_384),
        (StoreKind::Memory, 16_384),
        (StoreKind::Aws, 768),
    ] {
        c.store = store;
        assert_eq!(c.inline_limit(), limit, "{store:?}");
    }
}
