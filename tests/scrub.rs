//! The secret scrubber against a labelled corpus (tests/data/
//! secrets-corpus.tsv): every secret must be caught (its value gone, a
//! marker naming its rule in its place); false positives on the
//! look-alikes are counted, reported and held to the recorded number.

use ctx_core::branch::{RuleScrubber, Scrubber};

const CORPUS: &str = include_str!("data/secrets-corpus.tsv");
/// The false positives the rule set is known to have on the corpus; a
/// change must update this (and say why).
const KNOWN_FALSE_POSITIVES: usize = 0;

#[test]
fn every_secret_is_caught_and_false_positives_are_counted() {
    let scrubber = RuleScrubber::new().expect("the rules compile");
    let (mut secrets, mut caught, mut benign, mut false_positives) = (0, 0, 0, 0);
    let mut missed = Vec::new();
    let mut wrong = Vec::new();
    for line in CORPUS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let cols: Vec<&str> = line.splitn(4, '\t').collect();
        let [label, rule, secret, text] = cols[..] else {
            panic!("malformed corpus line {line:?}");
        };
        let text = text.replace("\\n", "\n");
        let out = scrubber.scrub(&text).expect("scrub");
        match label {
            "secret" => {
                secrets += 1;
                if out.text.contains(secret) {
                    missed.push(format!("{rule}: {text}"));
                } else {
                    caught += 1;
                    if !out.text.contains(&format!("[REDACTED:{rule}]")) {
                        wrong.push(format!("{rule}: {} -> {}", text, out.text));
                    }
                }
            }
            "benign" => {
                benign += 1;
                if out.total() > 0 {
                    false_positives += 1;
                    eprintln!("false positive: {text:?} -> {:?}", out.text);
                }
            }
            other => panic!("unknown label {other:?}"),
        }
    }
    eprintln!(
        "secret corpus: {caught}/{secrets} secrets caught, {false_positives}/{benign} look-alikes flagged"
    );
    assert!(secrets >= 30 && benign >= 30, "the corpus is too small");
    assert!(missed.is_empty(), "missed secrets:\n{}", missed.join("\n"));
    assert!(
        wrong.is_empty(),
        "caught by the wrong rule:\n{}",
        wrong.join("\n")
    );
    assert_eq!(false_positives, KNOWN_FALSE_POSITIVES);
}
