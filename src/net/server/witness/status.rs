//! The operator's view of `witness serve` (spec/witness.md "Status page
//! and metrics"): `GET /metrics` and `GET /`, both from the witness's own
//! state: the origins of its policy file and, for each, the size and time
//! of its last cosignature (read from the per-origin record, the
//! cosignature's own timestamp).

use crate::net::server::html::table;
use crate::net::server::html::{bdi, escape, page, utc};
use crate::net::server::metrics::{One, gauges};
use crate::net::server::{HttpMetrics, Routes};
use crate::tlog::cosig::Cosignature;
use crate::tlog::note::Note;
use crate::witness::Witness;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;
use std::sync::Arc;

/// What the witness last cosigned for one origin.
#[derive(Debug, Clone)]
pub(crate) struct LastCosigned {
    pub(crate) origin: String,
    /// Size and cosignature timestamp (POSIX seconds); `None`: never
    /// cosigned; `Err`: the record could not be read.
    pub(crate) last: Result<Option<(u64, u64)>, String>,
}

/// For every origin of the witness's policy, what it last cosigned.
pub(crate) fn last_cosigned(witness: &Witness) -> Vec<LastCosigned> {
    witness
        .logs()
        .iter()
        .map(|log| {
            let origin = log.name.clone();
            let last = match witness.store().load(&origin) {
                Ok(None) => Ok(None),
                Ok(Some(record)) => Ok(Some((
                    record.head.size,
                    own_timestamp(witness, &record.note).unwrap_or(0),
                ))),
                Err(e) => Err(crate::witness::error_chain(&e)),
            };
            LastCosigned { origin, last }
        })
        .collect()
}

/// The timestamp of the witness's own cosignature line in a record.
fn own_timestamp(witness: &Witness, note: &str) -> Option<u64> {
    let note = Note::parse(note.as_bytes()).ok()?;
    let line = note
        .signatures
        .iter()
        .find(|s| witness.verifier().matches(s))?;
    Cosignature::decode(line).ok().map(|c| c.timestamp)
}

/// The families of `witness serve`: the kit's (requests, add-checkpoint
/// answers) and the cosigned size and time of each origin, read at
/// scrape time.
#[derive(Debug)]
pub(crate) struct WitnessMetrics {
    http: HttpMetrics,
}

#[derive(Debug)]
struct Live {
    witness: Arc<Witness>,
}

impl WitnessMetrics {
    pub(crate) fn new(witness: Arc<Witness>, routes: Routes) -> WitnessMetrics {
        let mut http = HttpMetrics::new(routes);
        http.registry_mut()
            .register_collector(Box::new(Live { witness }));
        WitnessMetrics { http }
    }

    /// The requests and add-checkpoint answers, counted by the kit.
    pub(crate) fn http(&self) -> &HttpMetrics {
        &self.http
    }

    /// The exposition (reads the per-origin records: call off the async workers).
    pub(crate) fn scrape(&self) -> String {
        self.http.render()
    }
}

/// The tlog-witness meaning of an add-checkpoint status (a fixed set).
pub(crate) fn answer_reason(status: u16) -> &'static str {
    match status {
        200 => "ok",
        400 => "bad_request",
        403 => "bad_signature",
        404 => "unknown_log",
        409 => "conflict",
        413 => "too_large",
        408 => "body_timeout",
        422 => "inconsistent",
        405 => "method_not_allowed",
        s if s >= 500 => "server_error",
        _ => "other",
    }
}

impl Collector for Live {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let all = last_cosigned(&self.witness);
        let mut sizes = Vec::new();
        let mut times = Vec::new();
        for l in &all {
            if let Ok(Some((size, at))) = l.last {
                sizes.push((One("origin", &l.origin), size as f64));
                times.push((One("origin", &l.origin), at as f64));
            }
        }
        gauges(
            &mut encoder,
            "rcpt_witness_cosigned_size",
            "Tree size of the latest checkpoint this witness cosigned, per log origin",
            None,
            &sizes,
        )?;
        gauges(
            &mut encoder,
            "rcpt_witness_cosigned_timestamp",
            "POSIX time of this witness's latest cosignature, per log origin",
            Some(&Unit::Seconds),
            &times,
        )
    }
}

/// The witness's `GET /` page.
pub(crate) fn witness_page(witness: &Witness, now: u64) -> String {
    let rows = last_cosigned(witness).into_iter().map(|l| {
        let (size, at) = match &l.last {
            Ok(None) => ("never".to_string(), "never".to_string()),
            Ok(Some((size, at))) => (
                size.to_string(),
                format!(
                    "<time>{}</time> ({} s ago)",
                    utc(i64::try_from(*at).unwrap_or(i64::MAX)),
                    now.saturating_sub(*at)
                ),
            ),
            Err(e) => ("unreadable".to_string(), bdi(e)),
        };
        format!(
            "<tr><td class=\"origin\">{}</td><td class=\"cosigned-size\">{size}</td>\
             <td class=\"cosigned-at\">{at}</td></tr>\n",
            bdi(&l.origin)
        )
    });
    let body = format!(
        "<h1>rcpt witness <bdi id=\"witness-name\">{}</bdi></h1>\n<dl>\n\
         <dt>Witness key</dt><dd><code id=\"witness-key\">{}</code></dd>\n</dl>\n\
         <h2>Logs witnessed</h2>\n{}<h2>Protocol</h2>\n<p>C2SP tlog-witness: \
         <code>POST /add-checkpoint</code>; the latest cosigned checkpoint of a log at \
         <code>/&lt;hex SHA-256 of its origin&gt;/checkpoint</code>.</p>\n",
        escape(witness.name()),
        escape(&witness.verifier().to_string()),
        table(
            "origins",
            &["origin", "size last cosigned", "cosigned at"],
            rows
        )
    );
    page(&format!("rcpt witness {}", witness.name()), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_reasons_are_a_fixed_set() {
        let table = [
            (200, "ok"),
            (400, "bad_request"),
            (403, "bad_signature"),
            (404, "unknown_log"),
            (405, "method_not_allowed"),
            (408, "body_timeout"),
            (409, "conflict"),
            (413, "too_large"),
            (422, "inconsistent"),
            (500, "server_error"),
            (503, "server_error"),
            (418, "other"),
        ];
        for (status, reason) in table {
            assert_eq!(answer_reason(status), reason, "{status}");
        }
    }
}
