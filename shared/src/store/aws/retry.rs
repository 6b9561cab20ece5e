//! `TransactWriteItems` and the one retry policy of the aws stores.
//!
//! A cancelled transaction says why per item, in its cancellation reasons;
//! [`Cancellation`] reads them by name. A transient cancellation (a
//! concurrent transaction on the same items, throttling) is tried again by
//! [`transact`] under [`POLICY`]: bounded attempts, exponential backoff with
//! full jitter drawn from the store's [`IdSource`]. Unprocessed
//! `BatchWriteItem` requests back off under the same policy.
//!
//! Every `TransactWriteItems` of the aws stores is sent here ([`transact`],
//! or [`transact_once`] for a claim), and its end is mapped to the crate's
//! error in one place ([`written`]): a failed condition is an answer the
//! caller reads ([`Written::ConditionFailed`], naming the item), anything
//! else an error.

use std::fmt;
use std::time::Duration;

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, TransactWriteItem};

use super::sdk_error;
use super::table::Item;
use crate::clock::IdSource;
use crate::error::{Error, Result};

/// Why DynamoDB cancelled a `TransactWriteItems` (nothing was written).
#[derive(Debug, Clone, PartialEq)]
enum Cancellation {
    /// The condition of item `index` failed. `old` is that item as it was,
    /// when its write asked for it (`ReturnValuesOnConditionCheckFailure`)
    /// and it existed.
    ConditionalCheckFailed { index: usize, old: Option<Item> },
    /// A concurrent transaction (or write) held one of the items.
    TransactionConflict,
    /// The table or the account was over its throughput.
    ThrottlingError,
    /// Anything else (a validation error, an item collection over its
    /// size): trying again will not help. DynamoDB's reason codes.
    Other(Vec<String>),
}

/// One item's cancellation reason, by its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// This item did not cause the cancellation (`None`, or no code).
    None,
    ConditionalCheckFailed,
    TransactionConflict,
    /// `ThrottlingError`, `ProvisionedThroughputExceeded` or
    /// `RequestLimitExceeded`.
    Throttled,
    Other,
}

impl Reason {
    fn of(code: Option<&str>) -> Reason {
        match code {
            None | Some("None") => Reason::None,
            Some("ConditionalCheckFailed") => Reason::ConditionalCheckFailed,
            Some("TransactionConflict") => Reason::TransactionConflict,
            Some("ThrottlingError" | "ProvisionedThroughputExceeded" | "RequestLimitExceeded") => {
                Reason::Throttled
            }
            Some(_) => Reason::Other,
        }
    }
}

impl Cancellation {
    /// Reads DynamoDB's reasons (one per item of the transaction, in
    /// order). A failed condition wins (the first such item); then a reason
    /// that trying again cannot fix; then a conflict; then throttling.
    fn from_reasons(reasons: &[CancellationReason]) -> Cancellation {
        let named: Vec<Reason> = reasons.iter().map(|r| Reason::of(r.code())).collect();
        if let Some(index) = named
            .iter()
            .position(|r| *r == Reason::ConditionalCheckFailed)
        {
            let old = reasons[index].item().cloned().filter(|i| !i.is_empty());
            return Cancellation::ConditionalCheckFailed { index, old };
        }
        if named.contains(&Reason::Other) || named.iter().all(|r| *r == Reason::None) {
            return Cancellation::Other(
                reasons
                    .iter()
                    .filter_map(|r| r.code().map(str::to_owned))
                    .collect(),
            );
        }
        if named.contains(&Reason::TransactionConflict) {
            Cancellation::TransactionConflict
        } else {
            Cancellation::ThrottlingError
        }
    }

    /// Whether the same transaction may succeed if sent again.
    fn is_transient(&self) -> bool {
        matches!(
            self,
            Cancellation::TransactionConflict | Cancellation::ThrottlingError
        )
    }
}

impl fmt::Display for Cancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cancellation::ConditionalCheckFailed { index, .. } => {
                write!(f, "the condition of item {index} failed")
            }
            Cancellation::TransactionConflict => f.write_str("a concurrent transaction conflicted"),
            Cancellation::ThrottlingError => f.write_str("throttled"),
            Cancellation::Other(codes) => write!(f, "reasons {codes:?}"),
        }
    }
}

/// How a `TransactWriteItems` ended, when DynamoDB answered.
#[derive(Debug)]
enum Transact {
    /// Every write was made.
    Done,
    /// Nothing was written, for this reason.
    Cancelled(Cancellation),
}

/// What a `TransactWriteItems` did, when that is not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// Every write was made.
    Done,
    /// Nothing was written: the condition of item `index` (its place in
    /// the transaction) failed.
    ConditionFailed { index: usize },
}

/// The one mapping of a transaction's end, `what` naming the write (e.g.
/// "deleting commit ctx-…"): a failed condition is the caller's to read;
/// a cancellation that trying again may fix, once the policy has given up,
/// is `Unavailable`; one it cannot fix (a validation error, an item
/// collection over its size) is `Internal`; an SDK failure is classified
/// by [`sdk_error`].
///
/// # Errors
/// As above.
fn written(
    what: &str,
    end: std::result::Result<Transact, SdkError<TransactWriteItemsError>>,
) -> Result<Written> {
    match end {
        Ok(Transact::Done) => Ok(Written::Done),
        Ok(Transact::Cancelled(Cancellation::ConditionalCheckFailed { index, .. })) => {
            Ok(Written::ConditionFailed { index })
        }
        Ok(Transact::Cancelled(c)) if c.is_transient() => Err(Error::unavailable(format!(
            "{what}: DynamoDB cancelled the transaction ({c}); retry"
        ))),
        Ok(Transact::Cancelled(c)) => Err(Error::internal(format!(
            "{what}: DynamoDB cancelled the transaction ({c})"
        ))),
        Err(e) => Err(sdk_error(
            &format!("DynamoDB TransactWriteItems ({what})"),
            e,
        )),
    }
}

/// Bounded attempts with exponential backoff and full jitter: before
/// attempt `k + 1` (k ≥ 1) wait a uniformly random time in
/// `[0, min(cap, base · 2^(k-1))]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// Attempts in all, the first included.
    pub(super) attempts: u32,
    /// The ceiling of the first wait.
    pub(super) base: Duration,
    /// The largest ceiling.
    pub(super) cap: Duration,
}

/// The policy of every aws store: 15 attempts, at most about 2.6 s of
/// waiting in all (1.3 s expected), enough for the two dozen concurrent
/// branch creations the conformance races run on one counter item.
pub(super) const POLICY: Policy = Policy {
    attempts: 15,
    base: Duration::from_millis(10),
    cap: Duration::from_millis(250),
};

impl Policy {
    /// The wait after the `failed`-th failed attempt (1 for the first).
    pub(super) fn backoff(&self, failed: u32, ids: &dyn IdSource) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1 << failed.saturating_sub(1).min(20))
            .min(self.cap);
        let ceiling = u64::try_from(ceiling.as_micros()).unwrap_or(u64::MAX);
        let mut b = [0u8; 8];
        ids.fill(&mut b);
        Duration::from_micros(u64::from_le_bytes(b) % ceiling.saturating_add(1))
    }

    /// Waits [`Policy::backoff`].
    pub(super) async fn sleep(&self, failed: u32, ids: &dyn IdSource) {
        tokio::time::sleep(self.backoff(failed, ids)).await;
    }
}

/// Sends one `TransactWriteItems`, `what` naming it in errors, retrying a
/// transient cancellation (and `TransactionInProgressException`) under
/// [`POLICY`]. The SDK itself retries what it retries (network errors,
/// throttled requests).
///
/// # Errors
/// As [`written`]: `Unavailable` when the policy gave up on a transient
/// cancellation, or for a transient SDK failure; `Internal` otherwise.
pub(super) async fn transact(
    client: &aws_sdk_dynamodb::Client,
    ids: &dyn IdSource,
    what: &str,
    items: Vec<TransactWriteItem>,
) -> Result<Written> {
    let mut failed = 0;
    loop {
        let last = failed + 1 >= POLICY.attempts;
        match send(client, items.clone()).await {
            Ok(Transact::Cancelled(c)) if c.is_transient() && !last => {}
            Err(e) if !last && in_progress(&e) => {}
            end => return written(what, end),
        }
        failed += 1;
        POLICY.sleep(failed, ids).await;
    }
}

/// Sends one `TransactWriteItems` once, for a write that must not be tried
/// again (a claim that lost a race has lost it): `None` when a concurrent
/// transaction (or throttling) cancelled it.
///
/// # Errors
/// As [`written`].
pub(super) async fn transact_once(
    client: &aws_sdk_dynamodb::Client,
    what: &str,
    items: Vec<TransactWriteItem>,
) -> Result<Option<Written>> {
    match send(client, items).await {
        Ok(Transact::Cancelled(c)) if c.is_transient() => Ok(None),
        end => written(what, end).map(Some),
    }
}

/// One attempt: the transaction's end as DynamoDB told it.
async fn send(
    client: &aws_sdk_dynamodb::Client,
    items: Vec<TransactWriteItem>,
) -> std::result::Result<Transact, SdkError<TransactWriteItemsError>> {
    let e = match client
        .transact_write_items()
        .set_transact_items(Some(items))
        .send()
        .await
    {
        Ok(_) => return Ok(Transact::Done),
        Err(e) => e,
    };
    match e.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(c)) => Ok(Transact::Cancelled(
            Cancellation::from_reasons(c.cancellation_reasons()),
        )),
        _ => Err(e),
    }
}

/// `TransactionInProgressException`: another request with the same client
/// token is in flight.
fn in_progress(e: &SdkError<TransactWriteItemsError>) -> bool {
    matches!(
        e.as_service_error(),
        Some(TransactWriteItemsError::TransactionInProgressException(_))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SeededIds;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn reasons(codes: &[Option<&str>]) -> Vec<CancellationReason> {
        codes
            .iter()
            .map(|c| {
                CancellationReason::builder()
                    .set_code(c.map(str::to_owned))
                    .build()
            })
            .collect()
    }

    #[test]
    fn reasons_are_read_by_name() {
        let c = |codes: &[Option<&str>]| Cancellation::from_reasons(&reasons(codes));
        assert_eq!(
            c(&[Some("None"), None, Some("ConditionalCheckFailed")]),
            Cancellation::ConditionalCheckFailed {
                index: 2,
                old: None
            }
        );
        assert_eq!(
            c(&[Some("TransactionConflict"), Some("ConditionalCheckFailed")]),
            Cancellation::ConditionalCheckFailed {
                index: 1,
                old: None
            },
            "a failed condition wins: trying again cannot change it"
        );
        assert_eq!(
            c(&[Some("None"), Some("TransactionConflict")]),
            Cancellation::TransactionConflict
        );
        assert_eq!(
            c(&[Some("ProvisionedThroughputExceeded"), Some("None")]),
            Cancellation::ThrottlingError
        );
        assert_eq!(
            c(&[Some("ThrottlingError"), Some("TransactionConflict")]),
            Cancellation::TransactionConflict
        );
        assert_eq!(
            c(&[Some("TransactionConflict"), Some("ValidationError")]),
            Cancellation::Other(vec![
                "TransactionConflict".to_owned(),
                "ValidationError".to_owned()
            ])
        );
        assert_eq!(
            c(&[Some("None")]),
            Cancellation::Other(vec!["None".to_owned()])
        );
        assert!(c(&[Some("TransactionConflict")]).is_transient());
        assert!(c(&[Some("ThrottlingError")]).is_transient());
        assert!(!c(&[Some("ValidationError")]).is_transient());
        assert!(!c(&[Some("ConditionalCheckFailed")]).is_transient());
    }

    #[test]
    fn a_cancellation_maps_to_one_error_by_its_reason() {
        let end = |codes: &[Option<&str>]| {
            written(
                "deleting commit x",
                Ok(Transact::Cancelled(Cancellation::from_reasons(&reasons(
                    codes,
                )))),
            )
        };
        assert_eq!(
            end(&[Some("None"), Some("ConditionalCheckFailed")]).unwrap(),
            Written::ConditionFailed { index: 1 }
        );
        for transient in ["TransactionConflict", "ThrottlingError"] {
            let e = end(&[Some(transient)]).unwrap_err();
            assert_eq!(e.kind, crate::ErrorKind::Unavailable, "{e}");
            assert!(e.message.starts_with("deleting commit x: "), "{e}");
        }
        let e = end(&[Some("ValidationError")]).unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Internal, "{e}");
        assert_eq!(written("x", Ok(Transact::Done)).unwrap(), Written::Done);
    }

    #[test]
    fn the_old_item_of_a_failed_condition_is_kept() {
        let old = Item::from([("pk".to_owned(), AttributeValue::S("a".to_owned()))]);
        let r = vec![
            CancellationReason::builder().code("None").build(),
            CancellationReason::builder()
                .code("ConditionalCheckFailed")
                .set_item(Some(old.clone()))
                .build(),
        ];
        assert_eq!(
            Cancellation::from_reasons(&r),
            Cancellation::ConditionalCheckFailed {
                index: 1,
                old: Some(old)
            }
        );
    }

    #[test]
    fn backoff_is_full_jitter_under_a_growing_capped_ceiling() {
        let ids = SeededIds::new(7);
        for failed in 1..=POLICY.attempts {
            let ceiling = POLICY
                .base
                .saturating_mul(1 << (failed - 1).min(20))
                .min(POLICY.cap);
            let waits: Vec<Duration> = (0..200).map(|_| POLICY.backoff(failed, &ids)).collect();
            assert!(waits.iter().all(|w| *w <= ceiling), "{failed}: {waits:?}");
            // Spread over the whole range, not a fixed step.
            assert!(
                waits.iter().any(|w| *w < ceiling / 4),
                "{failed}: {waits:?}"
            );
            assert!(
                waits.iter().any(|w| *w > ceiling * 3 / 4),
                "{failed}: {waits:?}"
            );
        }
        assert_eq!(
            POLICY
                .base
                .saturating_mul(1 << (POLICY.attempts - 1))
                .min(POLICY.cap),
            POLICY.cap,
            "the ceiling reaches the cap"
        );
    }
}
