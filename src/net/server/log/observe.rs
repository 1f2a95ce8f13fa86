//! The metrics of `log serve` (spec/service.md "Metrics"): counters and
//! histograms the handlers and the writer thread update as they go, and
//! values read at scrape time (queue depth, tree size, checkpoint age, the
//! witnesses as the log saw them, the lease on object storage).

use super::routes::LogService;
use crate::net::client::witnessing::Witnessing;
use crate::net::server::metrics::{
    One, Two, count_buckets, counters, gauge, gauges, seconds_buckets, secs,
};
use crate::net::server::{HttpMetrics, Routes};
use crate::storage::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Every family `log serve` exposes.
#[derive(Debug)]
pub(super) struct Metrics {
    /// The registry, with the requests and the `POST /add` answers.
    http: HttpMetrics,
    batch_entries: Histogram,
    integration: Histogram,
    publication: Histogram,
    append_failures: Counter,
    queue_depth: Gauge,
    queue_capacity: Gauge,
    tree_size: Gauge,
    checkpoint_age: Gauge<f64, AtomicU64>,
    writer_up: Gauge,
}

/// What is read at scrape time from elsewhere: the witnesses and the lease.
#[derive(Debug)]
struct Live {
    witnessing: Option<Arc<Witnessing>>,
    store: Arc<dyn Store>,
}

impl Metrics {
    pub(super) fn new(witnessing: Option<Arc<Witnessing>>, store: Arc<dyn Store>) -> Metrics {
        let m = Metrics {
            http: HttpMetrics::new(ROUTES),
            batch_entries: Histogram::new(count_buckets()),
            integration: Histogram::new(seconds_buckets()),
            publication: Histogram::new(seconds_buckets()),
            append_failures: Counter::default(),
            queue_depth: Gauge::default(),
            queue_capacity: Gauge::default(),
            tree_size: Gauge::default(),
            checkpoint_age: Gauge::default(),
            writer_up: Gauge::default(),
        };
        m.register(Live { witnessing, store })
    }

    fn register(mut self, live: Live) -> Metrics {
        let r = self.http.registry_mut();
        r.register(
            "rcpt_batch_entries",
            "Entries per batch integrated by one durable append",
            self.batch_entries.clone(),
        );
        for (name, help, histogram) in [
            (
                "rcpt_batch_integration",
                "Time of one durable append (tiles, dedup, checkpoint), per batch",
                &self.integration,
            ),
            (
                "rcpt_checkpoint_publication",
                "Time from a batch's durable append to its checkpoint being published \
                 (the witnesses' cosignatures, for a witnessed log)",
                &self.publication,
            ),
        ] {
            r.register_with_unit(name, help, Unit::Seconds, histogram.clone());
        }
        r.register(
            "rcpt_append_failures",
            "Durable appends that failed (their batches answered 500)",
            self.append_failures.clone(),
        );
        self.register_gauges(live)
    }

    /// The gauges set at scrape time, and the values read from elsewhere.
    fn register_gauges(mut self, live: Live) -> Metrics {
        let r = self.http.registry_mut();
        for (name, help, gauge) in [
            (
                "rcpt_queue_depth",
                "Submissions in the service (being read, queued, integrated or answered)",
                &self.queue_depth,
            ),
            (
                "rcpt_queue_capacity",
                "Most submissions in the service at once (--queue-max)",
                &self.queue_capacity,
            ),
            (
                "rcpt_tree_size",
                "Tree size of the published checkpoint",
                &self.tree_size,
            ),
        ] {
            r.register(name, help, gauge.clone());
        }
        r.register_with_unit(
            "rcpt_checkpoint_age",
            "Seconds since this service last published a checkpoint (the stored one counts \
             as published at start; before any, seconds since start)",
            Unit::Seconds,
            self.checkpoint_age.clone(),
        );
        r.register(
            "rcpt_writer_up",
            "1 while the log writer runs, 0 once it stopped after an error",
            self.writer_up.clone(),
        );
        r.register_collector(Box::new(live));
        self
    }

    /// The requests and `POST /add` answers, counted by the kit.
    pub(super) fn http(&self) -> &HttpMetrics {
        &self.http
    }

    /// One durable append of `entries` entries that took `took`.
    pub(super) fn batch(&self, entries: usize, took: Duration) {
        self.batch_entries.observe(entries as f64);
        self.integration.observe(secs(took));
    }

    pub(super) fn append_failed(&self) {
        self.append_failures.inc();
    }

    /// A batch's checkpoint published `took` after its append.
    pub(super) fn published(&self, took: Duration) {
        self.publication.observe(secs(took));
    }

    /// The exposition, with the scrape-time gauges set first.
    pub(super) fn scrape(&self, ctx: &LogService) -> String {
        let capacity = ctx.queue_max;
        let free = ctx.permits.available_permits();
        self.queue_depth
            .set(i64::try_from(capacity.saturating_sub(free)).unwrap_or(i64::MAX));
        self.queue_capacity
            .set(i64::try_from(capacity).unwrap_or(i64::MAX));
        let published = ctx.shared.published();
        self.tree_size
            .set(i64::try_from(published.size).unwrap_or(i64::MAX));
        self.checkpoint_age.set(secs(ctx.shared.checkpoint_age()));
        self.writer_up
            .set(i64::from(ctx.shared.writer_alive.load(Ordering::Relaxed)));
        self.http.render()
    }
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(w) = &self.witnessing {
            let status = w.status();
            let mut requests = Vec::new();
            let mut sizes = Vec::new();
            for s in &status {
                for (outcome, n) in [
                    ("cosigned", s.cosigned),
                    ("refused", s.refused),
                    ("unreachable", s.unreachable),
                ] {
                    requests.push((Two(("witness", &s.name), ("outcome", outcome)), n));
                }
                if let Some(size) = s.known_size {
                    sizes.push((One("witness", &s.name), size as f64));
                }
            }
            counters(
                &mut encoder,
                "rcpt_witnessing_requests",
                "add-checkpoint exchanges with each policy witness, by outcome",
                &requests,
            )?;
            gauges(
                &mut encoder,
                "rcpt_witnessing_cosigned_size",
                "The tree size each policy witness last cosigned, as the log knows it",
                None,
                &sizes,
            )?;
        }
        if let Some(hold) = self.store.hold_status() {
            gauge(
                &mut encoder,
                "rcpt_lease_held",
                "1 while this sequencer holds the log's lease on object storage, 0 once lost",
                None,
                f64::from(u8::from(hold.held)),
            )?;
            gauge(
                &mut encoder,
                "rcpt_lease_remaining",
                "Time left on the lease before the sequencer must stop writing",
                Some(&Unit::Seconds),
                secs(hold.remaining),
            )?;
            counters(
                &mut encoder,
                "rcpt_lease_renewals",
                "Lease renewals, by outcome",
                &[
                    (One("outcome", "ok"), hold.renewals),
                    (One("outcome", "failed"), hold.renewal_failures),
                ],
            )?;
        }
        Ok(())
    }
}

/// The routes as the metrics name them.
const ROUTES: Routes = Routes {
    name_of: route_name,
    write_path: "/add",
    write_family: (
        "rcpt_add_answers",
        "POST /add answers, by HTTP status and reason code (ok for 200)",
    ),
};

/// The fixed route name of a request path (the label of
/// `rcpt_http_requests_total`: never the path itself).
pub(super) fn route_name(path: &str) -> &'static str {
    match path {
        "/" => "status",
        "/metrics" => "metrics",
        "/add" => "add",
        "/healthz" => "healthz",
        "/checkpoint" => "checkpoint",
        p if p.starts_with("/tile/entries/") => "entries",
        p if p.starts_with("/tile/") => "tile",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_a_fixed_set_never_the_path() {
        assert_eq!(route_name("/"), "status");
        assert_eq!(route_name("/metrics"), "metrics");
        assert_eq!(route_name("/add"), "add");
        assert_eq!(route_name("/checkpoint"), "checkpoint");
        assert_eq!(route_name("/tile/0/000"), "tile");
        assert_eq!(route_name("/tile/entries/000.p/3"), "entries");
        assert_eq!(route_name("/tile/../.rcpt/settings.json"), "tile");
        assert_eq!(route_name("/blake3:abc"), "other");
        assert_eq!(route_name("/metrics/"), "other");
    }
}
