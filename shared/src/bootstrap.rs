//! Building the backends of a process from its [`Config`], in one place:
//! `ctx serve` (memory, local or aws stores) and every Lambda call
//! [`Backends::build`], each saying with [`Needs`] what it uses, so a
//! Lambda builds nothing its routes never touch (no Step Functions client,
//! no scrubber for `history`).

use std::sync::Arc;

use crate::branch::{BranchStore, BranchTimer, Branching, NoTimer, RuleScrubber};
use crate::clock::{Clock, OsRandom};
use crate::config::{self, Config, StoreKind};
use crate::error::{Error, Result};
use crate::service::Service;
use crate::service::TokioTimer;
use crate::store::{Stores, TokenStore};
use crate::summarize::Summarizer;
use crate::wire::Group;

/// What a process uses of the backends beside the commit stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// The bearer-token store (`ctx serve`; a Lambda authenticates by JWT).
    pub tokens: bool,
    /// Context folding: the branch store, deadline timers, the secret
    /// scrubber and an id source.
    pub branching: bool,
    /// Whether deadlines may run as tokio timers in this process (a server
    /// that lives on) when Step Functions is not configured; otherwise they
    /// are then not enforced.
    pub process_timers: bool,
}

impl Needs {
    /// `ctx serve`: every route, bearer tokens, tokio timers.
    pub const SERVER: Needs = Needs {
        tokens: true,
        branching: true,
        process_timers: true,
    };

    /// Context folding only (`branch-expire`).
    pub const FOLDING: Needs = Needs {
        tokens: false,
        branching: true,
        process_timers: false,
    };

    /// What serving only the routes of `groups` uses (a Lambda): folding
    /// for the branch routes and for checkpoints (which count against a
    /// branch's budget and may force-return it); never tokens or tokio
    /// timers.
    pub fn routes(groups: &[Group]) -> Needs {
        Needs {
            branching: groups
                .iter()
                .any(|g| matches!(g, Group::Checkpoint | Group::Branches)),
            ..Needs::default()
        }
    }
}

/// How branch deadlines are enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadlines {
    /// Executions of the branch-timer state machine (`CTX_BRANCH_TIMER_ARN`
    /// with the aws store).
    StepFunctions,
    /// Tokio timers in this process.
    Tokio,
    /// Not at all (a Lambda without `CTX_BRANCH_TIMER_ARN`).
    Unenforced,
}

/// The backends of one process, built once.
pub struct Backends {
    /// The commit stores.
    pub stores: Stores,
    /// The bearer-token store, when [`Needs::tokens`].
    pub tokens: Option<Arc<dyn TokenStore>>,
    /// Context folding, when [`Needs::branching`].
    pub branching: Option<Branching>,
    /// How the folding's deadlines are enforced, when there is folding.
    pub deadlines: Option<Deadlines>,
    tokio_timer: Option<Arc<TokioTimer>>,
    max_artifact_bytes: usize,
    inline_delta_bytes: usize,
    download_url_bytes: u64,
    lifecycle: crate::service::LifecycleSettings,
    hot_cache_bytes: u64,
    /// What writes missing summaries and compactions (`CTX_SUMMARIZER`).
    pub summarizer: Arc<dyn Summarizer>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("tokens", &self.tokens.is_some())
            .field("branching", &self.branching.as_ref().map(|f| &f.config))
            .field("deadlines", &self.deadlines)
            .field("summarizer", &self.summarizer.id())
            .finish_non_exhaustive()
    }
}

/// The stores one kind of backend opens.
struct Opened {
    stores: Stores,
    tokens: Option<Arc<dyn TokenStore>>,
    branches: Option<Arc<dyn BranchStore>>,
}

impl Backends {
    /// Opens the stores `config.store` names and builds what `needs` asks
    /// for. With the local store, or when tokens are needed, the data
    /// directory is created; with the aws store the tokens stay in the data
    /// directory (SQLite). Deadlines are Step Functions executions when the
    /// store is aws and `CTX_BRANCH_TIMER_ARN` is set, else tokio timers
    /// when [`Needs::process_timers`], else not enforced (with a warning).
    ///
    /// # Errors
    /// `Invalid` for configuration the store needs and lacks (`CTX_BUCKET`,
    /// `CTX_TABLE`) or a store this build does not have (`aws` or `local`
    /// feature), for a summarizer missing its model or key, or one this
    /// build does not have (see [`crate::summarize::from_config`]);
    /// `Unavailable` when the
    /// data directory or a store cannot be opened; `Internal` if the
    /// scrubber's rules do not compile.
    pub async fn build(config: &Config, needs: Needs) -> Result<Backends> {
        let summarizer = crate::summarize::from_config(&config.summarizer)?;
        if needs.tokens || config.store == StoreKind::Local {
            std::fs::create_dir_all(&config.data).map_err(|e| {
                Error::unavailable(format!(
                    "cannot create the data directory {}: {e}",
                    config.data.display()
                ))
            })?;
        }
        let opened = match config.store {
            StoreKind::Local => open_local(config, needs)?,
            StoreKind::Memory => open_memory(needs),
            StoreKind::Aws => open_aws(config, needs).await?,
        };
        let mut tokio_timer = None;
        let (branching, deadlines) = match opened.branches {
            None => (None, None),
            Some(store) => {
                let (timer, deadlines): (Arc<dyn BranchTimer>, Deadlines) =
                    match (&config.branch_timer_arn, config.store) {
                        (Some(arn), StoreKind::Aws) => {
                            (sfn_timer(arn.clone()).await?, Deadlines::StepFunctions)
                        }
                        _ if needs.process_timers => {
                            let t = Arc::new(TokioTimer::new());
                            tokio_timer = Some(t.clone());
                            (t, Deadlines::Tokio)
                        }
                        _ => {
                            tracing::warn!(
                                "{} is not set: branch deadlines are not enforced",
                                config::CTX_BRANCH_TIMER_ARN
                            );
                            (Arc::new(NoTimer), Deadlines::Unenforced)
                        }
                    };
                let branching = Branching {
                    store,
                    timer,
                    scrubber: Arc::new(RuleScrubber::new()?),
                    ids: Arc::new(OsRandom),
                    config: config.branching.clone(),
                };
                (Some(branching), Some(deadlines))
            }
        };
        Ok(Backends {
            stores: opened.stores,
            tokens: opened.tokens,
            branching,
            deadlines,
            tokio_timer,
            max_artifact_bytes: config.max_artifact_bytes,
            inline_delta_bytes: config.inline_limit(),
            download_url_bytes: config.download_url_bytes,
            lifecycle: crate::service::LifecycleSettings {
                // S3's cached artifacts expire by lifecycle rule instead.
                cache_budget: (config.store != StoreKind::Aws && config.cache_bytes > 0)
                    .then_some(config.cache_bytes),
                gc_grace: config.gc_grace,
                backup_retention: (config.backup_retention_days > 0)
                    .then(|| std::time::Duration::from_secs(config.backup_retention_days * 86_400)),
            },
            summarizer,
            hot_cache_bytes: config.hot_cache_bytes,
        })
    }

    /// The service over these backends with the clock `clock` and the
    /// configured summarizer, with context folding when it was built; tokio
    /// timers are bound to it.
    pub fn into_service(self, clock: Arc<dyn Clock>) -> Service {
        let mut service = Service::new(self.stores, clock)
            .with_limits(crate::service::Limits {
                max_artifact_bytes: self.max_artifact_bytes,
                inline_delta_bytes: self.inline_delta_bytes,
                download_url_bytes: self.download_url_bytes,
                ..crate::service::Limits::default()
            })
            .with_summarizer(self.summarizer)
            .with_lifecycle(self.lifecycle)
            .with_hot_cache(self.hot_cache_bytes);
        if let Some(branching) = self.branching {
            service = service.with_branching(branching);
        }
        if let Some(timer) = &self.tokio_timer {
            timer.bind(service.clone());
        }
        service
    }
}

#[cfg(feature = "local")]
fn open_local(config: &Config, needs: Needs) -> Result<Opened> {
    use crate::store::local::{LocalBlobStore, SqliteMetaStore};
    let meta = Arc::new(SqliteMetaStore::open(&config.data)?);
    let blobs = Arc::new(LocalBlobStore::open(&config.data)?);
    let branches: Option<Arc<dyn BranchStore>> = if needs.branching {
        // On the commit database's own connections (one setup, one
        // durability setting).
        Some(Arc::new(meta.branch_store()))
    } else {
        None
    };
    Ok(Opened {
        stores: Stores {
            blobs,
            meta: meta.clone(),
        },
        tokens: needs.tokens.then_some(meta as Arc<dyn TokenStore>),
        branches,
    })
}

#[cfg(not(feature = "local"))]
fn open_local(_: &Config, _: Needs) -> Result<Opened> {
    Err(Error::invalid(
        "store",
        "this build has no local store (the `local` feature of ctx-core)",
    ))
}

fn open_memory(needs: Needs) -> Opened {
    use crate::store::memory::{MemoryBlobStore, MemoryBranchStore, MemoryMetaStore};
    let meta = Arc::new(MemoryMetaStore::new());
    Opened {
        stores: Stores {
            blobs: Arc::new(MemoryBlobStore::new()),
            meta: meta.clone(),
        },
        tokens: needs.tokens.then_some(meta as Arc<dyn TokenStore>),
        branches: needs
            .branching
            .then(|| Arc::new(MemoryBranchStore::new()) as Arc<dyn BranchStore>),
    }
}

#[cfg(feature = "aws")]
async fn open_aws(config: &Config, needs: Needs) -> Result<Opened> {
    use crate::store::aws::{AwsHooks, connect};
    let aws = config.aws()?;
    let (blobs, meta) = connect(&aws, AwsHooks::default()).await?;
    let branches = needs
        .branching
        .then(|| Arc::new(meta.branch_store()) as Arc<dyn BranchStore>);
    let tokens = if needs.tokens {
        Some(open_tokens_on_disk(config)?)
    } else {
        None
    };
    Ok(Opened {
        stores: Stores {
            blobs: Arc::new(blobs),
            meta: Arc::new(meta),
        },
        tokens,
        branches,
    })
}

#[cfg(not(feature = "aws"))]
async fn open_aws(_: &Config, _: Needs) -> Result<Opened> {
    Err(Error::invalid(
        "store",
        "this build has no aws store: build ctx with it, `cargo build --release -p ctx-cli --features aws`",
    ))
}

/// The aws store keeps bearer tokens in the data directory.
#[cfg(all(feature = "aws", feature = "local"))]
fn open_tokens_on_disk(config: &Config) -> Result<Arc<dyn TokenStore>> {
    Ok(Arc::new(crate::store::local::SqliteMetaStore::open(
        &config.data,
    )?))
}

#[cfg(all(feature = "aws", not(feature = "local")))]
fn open_tokens_on_disk(_: &Config) -> Result<Arc<dyn TokenStore>> {
    Err(Error::invalid(
        "store",
        "bearer tokens with the aws store live in SQLite: this build has no local store",
    ))
}

#[cfg(feature = "aws")]
async fn sfn_timer(arn: String) -> Result<Arc<dyn BranchTimer>> {
    use crate::store::aws::sfn::SfnTimer;
    Ok(Arc::new(SfnTimer::new(SfnTimer::sdk_client().await, arn)))
}

#[cfg(not(feature = "aws"))]
#[allow(clippy::unused_async)] // the aws build awaits the client
async fn sfn_timer(_: String) -> Result<Arc<dyn BranchTimer>> {
    Err(Error::invalid(
        "store",
        "this build has no Step Functions timers (the `aws` feature of ctx-core)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SystemClock;

    fn memory() -> Config {
        Config {
            store: StoreKind::Memory,
            ..Config::default()
        }
    }

    #[test]
    fn only_checkpoints_and_branches_need_branching() {
        for g in Group::ALL {
            let needs = Needs::routes(&[*g]);
            assert_eq!(
                needs.branching,
                matches!(g, Group::Checkpoint | Group::Branches),
                "{g:?}"
            );
            assert!(!needs.tokens && !needs.process_timers);
        }
    }

    #[tokio::test]
    async fn a_server_gets_tokens_branching_and_tokio_timers() {
        let dir = tempfile::tempdir().unwrap();
        for store in [StoreKind::Memory, StoreKind::Local] {
            let config = Config {
                store,
                data: dir.path().join("data"),
                ..Config::default()
            };
            let b = Backends::build(&config, Needs::SERVER).await.unwrap();
            assert!(b.tokens.is_some(), "{store}");
            assert_eq!(b.deadlines, Some(Deadlines::Tokio), "{store}");
            let service = b.into_service(Arc::new(SystemClock));
            assert!(service.branching().is_some());
        }
    }

    #[tokio::test]
    async fn routes_without_branches_build_only_the_stores() {
        let config = Config {
            branch_timer_arn: Some("arn:aws:states:us-east-1:1:stateMachine:t".into()),
            ..memory()
        };
        let b = Backends::build(&config, Needs::routes(&[Group::History, Group::Meta]))
            .await
            .unwrap();
        assert!(b.tokens.is_none() && b.branching.is_none() && b.deadlines.is_none());
        assert!(
            b.into_service(Arc::new(SystemClock)).branching().is_none(),
            "no folding"
        );
    }

    #[tokio::test]
    async fn branching_without_process_timers_or_step_functions_is_unenforced() {
        let b = Backends::build(&memory(), Needs::FOLDING).await.unwrap();
        assert_eq!(b.deadlines, Some(Deadlines::Unenforced));
        assert_eq!(
            b.branching.as_ref().map(|f| &f.config),
            Some(&Config::default().branching)
        );
    }

    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn the_aws_store_names_the_missing_variable() {
        let config = Config {
            store: StoreKind::Aws,
            table: Some("t".into()),
            ..Config::default()
        };
        let e = Backends::build(&config, Needs::default())
            .await
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("CTX_BUCKET"));
    }

    #[cfg(feature = "aws")]
    #[tokio::test]
    async fn the_aws_store_with_a_timer_arn_uses_step_functions_only_for_branches() {
        let Some(config) = Config::emulator_from_env() else {
            return;
        };
        let config = Config {
            branch_timer_arn: Some("arn:aws:states:us-east-1:123456789012:stateMachine:t".into()),
            ..config
        };
        let b = Backends::build(&config, Needs::FOLDING).await.unwrap();
        assert_eq!(b.deadlines, Some(Deadlines::StepFunctions));
        let b = Backends::build(&config, Needs::routes(&[Group::Resolve]))
            .await
            .unwrap();
        assert!(b.branching.is_none() && b.deadlines.is_none());
    }
}
