//! Secret scrubbing for branch returns, in the spirit of gitleaks: a rule
//! set for cloud keys, tokens of common services, private-key blocks, JWTs,
//! connection strings with passwords, and high-entropy values next to
//! secret-like names. A secret is replaced by `[REDACTED:<rule>]`.
//!
//! It fails closed: the service never appends a message whose scrub
//! returned an error (see `ops`), and a rule set that does not compile is an
//! error, not an empty rule set.

use std::collections::BTreeMap;

use regex_lite::Regex;

use crate::error::{Error, Result};

/// A scrubbed text and what was removed from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scrubbed {
    /// The text with every secret replaced by a marker.
    pub text: String,
    /// How many secrets each rule replaced.
    pub redactions: BTreeMap<String, usize>,
}

impl Scrubbed {
    /// Secrets replaced in all.
    pub fn total(&self) -> usize {
        self.redactions.values().sum()
    }
}

/// Removes secrets from text.
pub trait Scrubber: Send + Sync + 'static {
    /// `text` with its secrets replaced.
    ///
    /// # Errors
    /// Any error: the caller must then not use the text.
    fn scrub(&self, text: &str) -> Result<Scrubbed>;
}

/// How a rule replaces what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The whole match.
    Whole,
    /// Capture group `value`, if its entropy is high enough and it does not
    /// look like a placeholder.
    Value,
    /// Capture group `value` (a password in a URL), unless a placeholder.
    Password,
}

struct Rule {
    name: &'static str,
    re: Regex,
    target: Target,
}

/// The rule sources: (name, pattern, target).
const RULES: &[(&str, &str, Target)] = &[
    (
        "private-key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?s:.*?)(-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
        Target::Whole,
    ),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        Target::Whole,
    ),
    (
        "aws-access-key-id",
        r"\b(AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b",
        Target::Whole,
    ),
    (
        "aws-secret-access-key",
        r#"(?i)aws.{0,20}(secret|private).{0,20}?['"]?\s*[:=]\s*['"]?(?P<value>[A-Za-z0-9/+=]{40})\b"#,
        Target::Value,
    ),
    (
        "github-token",
        r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b|\bgithub_pat_[A-Za-z0-9_]{60,255}\b",
        Target::Whole,
    ),
    (
        "gitlab-token",
        r"\bglpat-[A-Za-z0-9_-]{20,}\b",
        Target::Whole,
    ),
    (
        "slack-token",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
        Target::Whole,
    ),
    (
        "slack-webhook",
        r"https://hooks\.slack\.com/(services|workflows)/[A-Za-z0-9+/_-]{20,}",
        Target::Whole,
    ),
    (
        "stripe-key",
        r"\b(sk|rk|pk)_(live|test)_[A-Za-z0-9]{16,}\b",
        Target::Whole,
    ),
    (
        "anthropic-api-key",
        r"\bsk-ant-[A-Za-z0-9_-]{20,}",
        Target::Whole,
    ),
    (
        "openai-api-key",
        r"\bsk-(proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        Target::Whole,
    ),
    (
        "google-api-key",
        r"\bAIza[0-9A-Za-z_-]{35}\b",
        Target::Whole,
    ),
    ("npm-token", r"\bnpm_[A-Za-z0-9]{36}\b", Target::Whole),
    (
        "pypi-token",
        r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        Target::Whole,
    ),
    (
        "sendgrid-api-key",
        r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
        Target::Whole,
    ),
    ("twilio-api-key", r"\bSK[0-9a-fA-F]{32}\b", Target::Whole),
    (
        "connection-string-password",
        r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,30}://[^\s:/@'\x22\[\]]{1,128}:(?P<value>[^\s@/'\x22\[\]]{1,256})@[^\s/'\x22]+",
        Target::Password,
    ),
    (
        "generic-secret",
        r#"(?i)[A-Za-z0-9_.-]*(secret|token|passw(or)?d|passwd|pwd|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|credential|client[_-]?secret|private[_-]?key|signing[_-]?key)[A-Za-z0-9_.-]*['"]?\s*(:=|=>|:|=)\s*['"]?(?P<value>[A-Za-z0-9_\-+/=.~!@#$%^&*]{8,200})"#,
        Target::Value,
    ),
    (
        "bearer-token",
        r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9_\-+/=.~]{16,})",
        Target::Value,
    ),
];

/// The built-in rule set.
pub struct RuleScrubber {
    rules: Vec<Rule>,
}

impl std::fmt::Debug for RuleScrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleScrubber")
            .field(
                "rules",
                &self.rules.iter().map(|r| r.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl RuleScrubber {
    /// Compiles the built-in rules.
    ///
    /// # Errors
    /// `Internal` naming a rule that does not compile.
    pub fn new() -> Result<Self> {
        let rules = RULES
            .iter()
            .map(|(name, pattern, target)| {
                Regex::new(pattern)
                    .map(|re| Rule {
                        name,
                        re,
                        target: *target,
                    })
                    .map_err(|e| {
                        Error::internal(format!("secret rule {name} does not compile: {e}"))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RuleScrubber { rules })
    }

    /// The rule names, in the order they apply.
    pub fn rule_names(&self) -> Vec<&'static str> {
        self.rules.iter().map(|r| r.name).collect()
    }
}

/// Shannon entropy of `s` in bits per character.
pub fn entropy(s: &str) -> f64 {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let n = s.chars().count();
    if n == 0 {
        return 0.0;
    }
    for c in s.chars() {
        *counts.entry(c).or_default() += 1;
    }
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n as f64;
            -p * p.log2()
        })
        .sum()
}

/// Whether `v` is a placeholder or a reference rather than a value.
fn placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    const PLACEHOLDERS: &[&str] = &[
        "changeme",
        "password",
        "example",
        "placeholder",
        "your_",
        "your-",
        "redacted",
        "xxxxxxxx",
        "********",
        "<",
        "${",
        "{{",
        "process.env",
        "os.environ",
        "env(",
        "getenv",
        "none",
        "null",
        "undefined",
        "true",
        "false",
        "secret_name",
        "dummy",
        "notasecret",
        "not-a-secret",
        "test1234",
    ];
    PLACEHOLDERS.iter().any(|p| lower.contains(p))
        || v.starts_with("[REDACTED")
        // A file path names where a secret is, not the secret.
        || v.starts_with('/')
        || v.starts_with("./")
        || v.starts_with("~/")
}

/// Whether a value next to a secret-like name is a real secret rather than
/// a placeholder, a reference to one, a marker or plain prose.
fn looks_secret(value: &str) -> bool {
    let v = value.trim_matches(|c| c == '"' || c == '\'' || c == ',' || c == ';');
    if v.len() < 8 || placeholder(v) {
        return false;
    }
    // Identifiers and words (`self.token`, `get_api_key`, `tokenizer`) are
    // not secrets: a secret mixes character classes or is long and random.
    let classes = [
        v.chars().any(|c| c.is_ascii_lowercase()),
        v.chars().any(|c| c.is_ascii_uppercase()),
        v.chars().any(|c| c.is_ascii_digit()),
        v.chars().any(|c| !c.is_ascii_alphanumeric()),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    let has_digit = v.chars().any(|c| c.is_ascii_digit());
    let e = entropy(v);
    if v.chars()
        .all(|c| c.is_ascii_alphabetic() || c == '_' || c == '.' || c == '-')
    {
        // Words joined by separators: only very long random-looking ones.
        return v.len() >= 24 && e >= 4.0 && classes >= 2;
    }
    (classes >= 2 && has_digit && e >= 3.0) || (v.len() >= 20 && e >= 3.5)
}

impl Scrubber for RuleScrubber {
    fn scrub(&self, text: &str) -> Result<Scrubbed> {
        let mut out = Scrubbed {
            text: text.to_owned(),
            redactions: BTreeMap::new(),
        };
        for rule in &self.rules {
            let marker = format!("[REDACTED:{}]", rule.name);
            let mut spans = Vec::new();
            for caps in rule.re.captures_iter(&out.text) {
                let span = match rule.target {
                    Target::Whole => caps.get(0),
                    Target::Value => caps.name("value").filter(|m| looks_secret(m.as_str())),
                    Target::Password => caps.name("value").filter(|m| !placeholder(m.as_str())),
                };
                if let Some(m) = span {
                    spans.push(m.range());
                }
            }
            if spans.is_empty() {
                continue;
            }
            let mut next = String::with_capacity(out.text.len());
            let mut at = 0;
            for r in &spans {
                next.push_str(&out.text[at..r.start]);
                next.push_str(&marker);
                at = r.end;
            }
            next.push_str(&out.text[at..]);
            out.text = next;
            *out.redactions.entry(rule.name.to_owned()).or_default() += spans.len();
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(s: &str) -> Scrubbed {
        RuleScrubber::new().unwrap().scrub(s).unwrap()
    }

    #[test]
    fn every_rule_compiles() {
        assert_eq!(RuleScrubber::new().unwrap().rule_names().len(), RULES.len());
    }

    #[test]
    fn secrets_become_markers_naming_the_rule() {
        let s = scrub("key AKIAIOSFODNN7EXAMPLQ and ghp_0123456789abcdefghijABCDEFGHIJ012345 ok");
        assert_eq!(
            s.text,
            "key [REDACTED:aws-access-key-id] and [REDACTED:github-token] ok"
        );
        assert_eq!(s.total(), 2);
        let s = scrub("DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/app");
        assert!(!s.text.contains("s3cr3t"), "{}", s.text);
        let s =
            scrub("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter");
        assert_eq!(s.text, "[REDACTED:private-key]\nafter");
    }

    #[test]
    fn look_alikes_stay() {
        for s in [
            "let token = self.token.clone();",
            "password: changeme",
            "api_key = os.environ['API_KEY']",
            "see https://example.com/path?x=1",
            "the tokenizer splits words",
            "commit ctx-0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(scrub(s).text, s);
        }
    }
}
