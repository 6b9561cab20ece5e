//! Property tests: concatenation commutes with materialization for every
//! format, and no decoder panics on arbitrary or mutated bytes.

use super::*;

fn message_strategy() -> impl Strategy<Value = Message> {
    (
        any::<bool>(),
        "[a-zA-Z0-9 é✓\"\\\\\n]{0,24}",
        proptest::option::of("[a-z]{1,8}"),
    )
        .prop_map(|(user, text, thought)| {
            let mut content = Vec::new();
            if let (false, Some(t)) = (user, thought) {
                content.push(Block::Thinking {
                    thinking: t,
                    signature: Some("sig".into()),
                });
            }
            content.push(Block::text(format!("m{text}")));
            Message {
                role: if user { Role::User } else { Role::Assistant },
                content,
                timestamp: Some("2026-11-22T10:00:00Z".into()),
                origin: 0,
            }
        })
}

/// Parses a context into a comparable value.
fn value_of(format: &str, bytes: &[u8]) -> Value {
    match format {
        f if f == "raw" || LINES.contains(&f) => json!(String::from_utf8_lossy(bytes)),
        _ => render(format, bytes),
    }
}

fn concat_equals_whole(format: &str, deltas: &[Vec<Message>]) -> Result<(), TestCaseError> {
    let f = formats();
    let codec = f.codec(&fid(format)).clone();
    let encode = |msgs: &[Message]| -> Bytes {
        let conv = Conversation {
            messages: msgs.to_vec(),
        };
        if format == "raw" {
            Bytes::from(canonical::narrative(&conv, "raw", "test"))
        } else {
            codec.encode_canonical(&conv).unwrap().bytes
        }
    };
    let parts: Vec<Bytes> = deltas.iter().map(|d| encode(d)).collect();
    // The one-delta equivalent: byte append for line formats, one array
    // of every message for array formats.
    let whole: Bytes = match format {
        f if f == "raw" || LINES.contains(&f) => parts
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect::<Vec<u8>>()
            .into(),
        _ => encode(&deltas.concat()),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (svc, tenant) = service();
        let mut parent = None;
        for (i, p) in parts.iter().enumerate() {
            let (c, _) = checkpoint(
                &svc,
                &tenant,
                request(format, p, parent, CommitType::Delta, i as i64),
            )
            .await
            .unwrap();
            parent = Some(c.id);
        }
        let (chain, tier) = materialized(&svc, &tenant, &parent.unwrap(), Stop::Root, None).await;
        prop_assert_eq!(tier, "native");
        let (one, _) = {
            let (c, _) = checkpoint(
                &svc,
                &tenant,
                request(format, &whole, None, CommitType::Delta, 100),
            )
            .await
            .unwrap();
            materialized(&svc, &tenant, &c.id, Stop::Root, None).await
        };
        prop_assert_eq!(value_of(format, &chain), value_of(format, &one));
        prop_assert!(codec.validate(&chain).is_ok());
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Checkpointing k deltas then materializing gives what materializing
    /// their concatenation as one delta gives, for every format.
    #[test]
    fn materializing_k_deltas_equals_materializing_their_concatenation(
        deltas in proptest::collection::vec(proptest::collection::vec(message_strategy(), 0..4), 1..5),
    ) {
        for format in std::iter::once("raw").chain(STRUCTURED) {
            concat_equals_whole(format, &deltas)?;
        }
    }

    /// The fuzz target: arbitrary bytes into every decoder never panic.
    #[test]
    fn arbitrary_bytes_never_panic_a_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let f = formats();
        for id in f.ids() {
            let c = f.codec(id);
            let _ = c.validate(&bytes);
            let _ = c.to_canonical(&bytes);
            let _ = c.count(&bytes);
            let b = Bytes::from(bytes.clone());
            let _ = c.concat(&[b.clone(), b]);
        }
        let _ = segments(&bytes);
        let _ = codex_segments(&bytes);
        let _ = gemini_segments(&bytes);
    }

    /// Valid inputs cut short or with one byte changed never panic a
    /// decoder either (random bytes rarely get past the first check).
    #[test]
    fn mutated_valid_deltas_never_panic_a_decoder(cut in 0..4000usize, flip in 0..4000usize, byte in any::<u8>()) {
        let f = formats();
        let reference = reference();
        for format in STRUCTURED {
            let c = f.codec(&fid(format));
            let mut bytes = c.encode_canonical(&reference).unwrap().bytes.to_vec();
            let n = bytes.len();
            bytes[flip % n] = byte;
            bytes.truncate(cut % (n + 1));
            let _ = c.validate(&bytes);
            let _ = c.to_canonical(&bytes);
            let _ = segments(&bytes);
            let _ = codex_segments(&bytes);
            let _ = gemini_segments(&bytes);
            for to in STRUCTURED {
                let _ = translate(&f, vec![Part { origin: "x".into(), format: fid(format), bytes: Bytes::from(bytes.clone()) }], &fid(to));
            }
        }
    }
}
