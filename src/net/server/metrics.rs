//! metrics: what `GET /metrics` of `log serve` and `witness serve` shares
//! (spec/service.md "Metrics"): the exposition media type, the rendering
//! of a registry (OpenMetrics text by `prometheus-client`, never written
//! by hand), the bucket layouts, the label sets, and the writers of
//! values read at scrape time (a collector's gauges and counters).
//!
//! Label values come only from fixed sets (route names, HTTP status
//! codes, reason codes, outcomes) or from the operator's own files (the
//! witness names of the policy, the origins a witness witnesses): never
//! from a request (no receipt id, no remote address, no path).

use crate::net::server::reply::Reply;
use hyper::Method;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};

/// `Content-Type` of `/metrics`: OpenMetrics 1.0 text, which Prometheus
/// scrapes natively.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A service's routes, as its metrics name them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Routes {
    /// The fixed route name of a request path: a label, never the path.
    pub(crate) name_of: fn(&str) -> &'static str,
    /// The service's write route (`POST` only), whose answers are counted
    /// by status and reason.
    pub(crate) write_path: &'static str,
    /// The name and help of that count's family.
    pub(crate) write_family: (&'static str, &'static str),
}

/// The registry of a service, with the two families every service has:
/// `rcpt_http_requests_total` (by route and status) and the answers of
/// its write route (by status and reason code, `ok` for a 200). The
/// service registers its own families beside them.
#[derive(Debug)]
pub(crate) struct HttpMetrics {
    registry: Registry,
    requests: Family<RouteStatus, Counter>,
    answers: Family<StatusReason, Counter>,
    routes: Routes,
}

impl HttpMetrics {
    /// The registry, its first two families registered.
    pub(crate) fn new(routes: Routes) -> HttpMetrics {
        let mut m = HttpMetrics {
            registry: Registry::default(),
            requests: Family::default(),
            answers: Family::default(),
            routes,
        };
        m.registry.register(
            "rcpt_http_requests",
            "Requests answered, by route and HTTP status",
            m.requests.clone(),
        );
        let (name, help) = routes.write_family;
        m.registry.register(name, help, m.answers.clone());
        m
    }

    /// The registry, for the service's own families.
    pub(crate) fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Count one answered request: its route and status, and for the
    /// write route its reason (`ok` when it was not a refusal).
    pub(crate) fn answered(&self, method: &Method, path: &str, reply: &Reply) {
        let status = reply.status().as_u16();
        let route = (self.routes.name_of)(path);
        self.requests
            .get_or_create(&RouteStatus { route, status })
            .inc();
        if path == self.routes.write_path && method == Method::POST {
            let reason = reply.reason().unwrap_or("ok");
            self.answers
                .get_or_create(&StatusReason { status, reason })
                .inc();
        }
    }

    /// The exposition (values a collector writes are read now).
    pub(crate) fn render(&self) -> String {
        render(&self.registry)
    }
}

/// The registry as OpenMetrics text (ending in `# EOF`).
fn render(registry: &Registry) -> String {
    let mut out = String::with_capacity(8 * 1024);
    // Writing to a String cannot fail; an encoder error would only come
    // from a metric of ours, and then the page says so instead.
    if prometheus_client::encoding::text::encode(&mut out, registry).is_err() {
        out = "# the metrics could not be encoded\n# EOF\n".to_string();
    }
    out
}

/// Buckets of a latency histogram, in seconds: 1 ms to about 65 s, doubling.
pub(crate) fn seconds_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 17)
}

/// Buckets of a count histogram: 1, 2, 4, … 131,072 (past the largest batch).
pub(crate) fn count_buckets() -> impl Iterator<Item = f64> {
    prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 18)
}

/// Requests by route (a fixed name, never the path) and status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct RouteStatus {
    route: &'static str,
    status: u16,
}

impl EncodeLabelSet for RouteStatus {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabel::encode(&("route", self.route), encoder.encode_label())?;
        EncodeLabel::encode(&("status", self.status), encoder.encode_label())
    }
}

/// Answers by status code and reason code (`ok` for a 200; else the
/// answer's own reason code, one of a fixed set).
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct StatusReason {
    status: u16,
    reason: &'static str,
}

impl EncodeLabelSet for StatusReason {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabel::encode(&("status", self.status), encoder.encode_label())?;
        EncodeLabel::encode(&("reason", self.reason), encoder.encode_label())
    }
}

/// One label, for the values a collector writes at scrape time.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct One<'a>(pub(crate) &'static str, pub(crate) &'a str);

impl EncodeLabelSet for One<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabel::encode(&(self.0, self.1), encoder.encode_label())
    }
}

/// Two labels, for the values a collector writes at scrape time.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub(crate) struct Two<'a>(
    pub(crate) (&'static str, &'a str),
    pub(crate) (&'static str, &'a str),
);

impl EncodeLabelSet for Two<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabel::encode(&self.0, encoder.encode_label())?;
        EncodeLabel::encode(&self.1, encoder.encode_label())
    }
}

/// A gauge family of one value, written at scrape time.
pub(crate) fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

/// A family of `M` with one value per label set, written at scrape time.
fn family<'a, S: EncodeLabelSet + 'a, M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder,
    (name, help, unit): (&str, &str, Option<&Unit>),
    values: impl IntoIterator<Item = (&'a S, M)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, unit, M::TYPE)?;
    for (labels, metric) in values {
        metric.encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

/// A gauge family with one value per label set, written at scrape time.
pub(crate) fn gauges<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    values: &[(S, f64)],
) -> Result<(), std::fmt::Error> {
    let values = values.iter().map(|(l, v)| (l, ConstGauge::new(*v)));
    family(encoder, (name, help, unit), values)
}

/// A counter family (`NAME_total`) with one value per label set, written
/// at scrape time from counts kept elsewhere.
pub(crate) fn counters<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    values: &[(S, u64)],
) -> Result<(), std::fmt::Error> {
    let values = values.iter().map(|(l, v)| (l, ConstCounter::new(*v)));
    family(encoder, (name, help, None), values)
}

/// Seconds as a float.
pub(crate) fn secs(d: std::time::Duration) -> f64 {
    d.as_secs_f64()
}
