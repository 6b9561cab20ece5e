//! Tests of [`super`].
use super::*;

#[test]
fn session_ids_are_what_can_name_their_ref_and_are_never_altered() {
    for ok in ["s1", "team-a/s1", "a.b_c-d", "x".repeat(191).as_str()] {
        let id: SessionId = ok.parse().unwrap();
        assert_eq!(id.as_str(), ok);
    }
    for bad in [
        "",
        "a\0b",
        " s",
        "s ",
        "a b",
        "a@b",
        "../x",
        "a//b",
        "/a",
        "a/",
        "x".repeat(192).as_str(),
    ] {
        let e = bad.parse::<SessionId>().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("session_id"), "{bad:?}");
    }
}
use proptest::prelude::*;

#[test]
fn hash_wire_format_is_hex_in_json_and_bytes_in_binary() {
    let h = Hash::of(b"hello");
    let json = serde_json::to_string(&h).unwrap();
    assert_eq!(
        json,
        "\"ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f\""
    );
    assert_eq!(serde_json::from_str::<Hash>(&json).unwrap(), h);
    // CBOR is not human-readable: a byte string of 32 raw bytes.
    let mut cbor = Vec::new();
    ciborium::into_writer(&h, &mut cbor).unwrap();
    assert_eq!(cbor[..2], [0x58, 0x20]);
    assert_eq!(&cbor[2..], h.as_bytes());
    let back: Hash = ciborium::from_reader(&cbor[..]).unwrap();
    assert_eq!(back, h);
}

#[test]
fn ids_parse_and_reject() {
    let c: CommitId = "ctx-0123456789abcdef0123456789abcdef".parse().unwrap();
    assert_eq!(c.to_string(), "ctx-0123456789abcdef0123456789abcdef");
    for bad in [
        "ctx-0123",
        "ctx-0123456789ABCDEF0123456789abcdef",
        "art-0123456789abcdef0123456789abcdef",
        "ctx-0123456789abcdef0123456789abcdeg",
        "",
    ] {
        let e = bad.parse::<CommitId>().unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Invalid, "{bad}");
    }
    assert!(
        "br-0123456789abcdef0123456789abcdef"
            .parse::<BranchId>()
            .is_ok()
    );
    let a = ArtifactRef::of(b"x");
    assert_eq!(a.to_string().parse::<ArtifactRef>().unwrap(), a);
    assert!("art-xyz".parse::<ArtifactRef>().is_err());
}

#[test]
fn names_validate() {
    assert!("acme-1".parse::<TenantId>().is_ok());
    assert!("-acme".parse::<TenantId>().is_err());
    assert!("Acme".parse::<TenantId>().is_err());
    assert!("agent@host".parse::<Principal>().is_ok());
    assert!("a\u{7}b".parse::<Principal>().is_err());
    assert!("sessions/s-42/head".parse::<RefName>().is_ok());
    for bad in ["", "/a", "a/", "a//b", "a/../b", "a b", "a?"] {
        assert!(bad.parse::<RefName>().is_err(), "{bad:?}");
    }
}

#[test]
fn principals_refuse_what_other_names_refuse() {
    for good in [
        "alice",
        "agent-7",
        "alice@example.com",
        "team/bot:claude",
        "a.b_c+d",
    ] {
        assert!(good.parse::<Principal>().is_ok(), "{good:?}");
    }
    for bad in [
        "", "a b", " alice", "alice ", "a\tb", "a\u{7}b", "é", "a?b", "a#b", "a%20b",
    ] {
        let e = bad.parse::<Principal>().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("principal"), "{bad:?}");
    }
    assert!("p".repeat(256).parse::<Principal>().is_ok());
    assert!("p".repeat(257).parse::<Principal>().is_err());
    let re = regex_lite::Regex::new(PRINCIPAL_PATTERN).unwrap();
    for name in ["alice", "a@b:c/d+e.f_g-h", "", "a b", "é", "a#b", "a\u{0}"] {
        assert_eq!(
            re.is_match(name),
            name.parse::<Principal>().is_ok(),
            "{name:?}"
        );
    }
}

#[test]
fn the_documented_ref_name_pattern_accepts_what_parses() {
    let re = regex_lite::Regex::new(REF_NAME_PATTERN).unwrap();
    for name in [
        "main",
        "sessions/s-42/head",
        ".",
        "a/./b",
        ".a.",
        "a.b_c-D",
        "",
        "/a",
        "a/",
        "a//b",
        "a/../b",
        "..",
        "a b",
        "a?",
        "é",
    ] {
        assert_eq!(
            re.is_match(name),
            name.parse::<RefName>().is_ok(),
            "{name:?}"
        );
    }
}

#[test]
fn derived_ids_depend_on_every_input() {
    let t: TenantId = "t".parse().unwrap();
    let u: TenantId = "u".parse().unwrap();
    let a = ArtifactRef::of(b"a");
    let b = ArtifactRef::of(b"b");
    let p = CommitId::derive(&t, None, &a, 1, "x");
    let base = CommitId::derive(&t, Some(&p), &a, 1, "x");
    assert_eq!(base, CommitId::derive(&t, Some(&p), &a, 1, "x"));
    assert_ne!(base, CommitId::derive(&u, Some(&p), &a, 1, "x"));
    assert_ne!(base, CommitId::derive(&t, None, &a, 1, "x"));
    assert_ne!(base, CommitId::derive(&t, Some(&p), &b, 1, "x"));
    assert_ne!(base, CommitId::derive(&t, Some(&p), &a, 2, "x"));
    assert_ne!(base, CommitId::derive(&t, Some(&p), &a, 1, "y"));
}

proptest! {
    #[test]
    fn commit_ids_round_trip(bytes in any::<[u8; 16]>()) {
        let id = CommitId::from_bytes(bytes);
        prop_assert_eq!(id.to_string().parse::<CommitId>().unwrap(), id);
        let json = serde_json::to_string(&id).unwrap();
        prop_assert_eq!(serde_json::from_str::<CommitId>(&json).unwrap(), id);
    }

    #[test]
    fn hashes_round_trip(bytes in any::<[u8; 32]>()) {
        let h = Hash::from_bytes(bytes);
        prop_assert_eq!(h.to_string().parse::<Hash>().unwrap(), h);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(s in ".{0,80}") {
        let _ = s.parse::<CommitId>();
        let _ = s.parse::<ArtifactRef>();
        let _ = s.parse::<RefName>();
        let _ = s.parse::<TenantId>();
    }
}
