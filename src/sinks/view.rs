//! How an interval reaches the person watching: the [`View`] trait and the
//! two line-oriented views. `watch` and `replay` drive the same views, so a
//! recording replays exactly as it was seen live.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::analysis::attribution_json::{self, write_attributions};
use crate::analysis::{FlowAttribution, IntervalAnalysis};
use crate::model::fold::encode_within;
use crate::model::snapshot::Snapshot;
use crate::model::{flow_json, json_splice};
use crate::record::MAX_LINE_BYTES;
use crate::shared::signals;
use crate::sinks::table;

/// What the view wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    Continue,
    /// The user quit (key, Ctrl-C, closed pipe): stop observing cleanly.
    Quit,
}

/// A sink that shows intervals and owns the wait between them (so a
/// full-screen view can react to keys while nothing new arrives).
pub(crate) trait View {
    /// Shows one interval; `source` says where it came from (`live`, or the
    /// recording and its time for a replay).
    fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        source: &str,
    ) -> Result<Control>;

    /// Waits until `deadline` (or a stop request).
    fn wait(&mut self, deadline: Instant) -> Result<Control> {
        let stop = signals::sleep_or_stop(deadline.saturating_duration_since(Instant::now()));
        Ok(if stop {
            Control::Quit
        } else {
            Control::Continue
        })
    }

    /// The source has no more intervals (a replay reached the end of its
    /// recording; not called when the person quit first). A view that would
    /// vanish with the program may hold its last screen until the person
    /// is done; line-oriented views have nothing to hold.
    fn end_of_input(&mut self) -> Result<()> {
        Ok(())
    }

    /// Restores whatever the view changed (the terminal); called once, also
    /// after an error, before any message is printed.
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// `--kafka-role`/`--kafka-group`: the view shows the flows (and the
/// by-role sums) the filter keeps; the interval is judged, recorded and
/// exported whole before it gets here.
pub(crate) struct KafkaFilteredView {
    inner: Box<dyn View>,
    filter: crate::model::kafka::KafkaFilter,
}

impl KafkaFilteredView {
    pub(crate) fn new(inner: Box<dyn View>, filter: crate::model::kafka::KafkaFilter) -> Self {
        KafkaFilteredView { inner, filter }
    }

    /// The interval as the view shows it.
    pub(crate) fn narrow(
        &self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
    ) -> (Snapshot, IntervalAnalysis) {
        let mut snap = snap.clone();
        snap.flows.retain(|f| self.filter.keeps(f.kafka.as_ref()));
        let kept: std::collections::HashSet<u64> = snap.flows.iter().map(|f| f.id).collect();
        let mut analysis = analysis.clone();
        analysis.flows.retain(|f| kept.contains(&f.flow_id));
        analysis
            .kafka
            .retain(|r| self.filter.keeps_identity(&r.who));
        (snap, analysis)
    }
}

impl View for KafkaFilteredView {
    fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        source: &str,
    ) -> Result<Control> {
        let (snap, analysis) = self.narrow(snap, analysis);
        self.inner.show(&snap, &analysis, source)
    }

    fn wait(&mut self, deadline: Instant) -> Result<Control> {
        self.inner.wait(deadline)
    }

    fn end_of_input(&mut self) -> Result<()> {
        self.inner.end_of_input()
    }

    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// One line of `--json`: the snapshot's fields, plus its analysis. A
/// reader that only knows [`Snapshot`] can still parse it.
#[derive(Debug, Serialize)]
pub(crate) struct WatchLine<'a> {
    #[serde(flatten)]
    pub snapshot: &'a Snapshot,
    pub analysis: &'a IntervalAnalysis,
}

/// `--json`: one object per interval on stdout.
#[derive(Default)]
pub(crate) struct JsonView {
    /// The previous line's length: the next is encoded into a buffer that
    /// size and an eighth, not one grown by doubling from nothing (at 200
    /// flows a line is ~400 KB: 19 reallocations and copies an interval).
    last_len: usize,
}

/// Plain tables on stdout: `--plain`, or stdout is not a terminal.
pub(crate) struct PlainView {
    pub top: usize,
}

/// Nothing per interval (`record`): the loop still runs the other sinks.
pub(crate) struct SilentView;

fn write_stdout(bytes: &[u8]) -> Result<Control> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(Control::Continue),
        // A closed pipe (`| head`) is a normal way to stop.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Control::Quit),
        // A terminal that went away (EIO after a hangup): stop as SIGHUP
        // would, the recording closed with reason `hangup`.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EIO) | Some(libc::ENXIO)) => {
            signals::terminal_lost();
            Ok(Control::Quit)
        }
        Err(e) => Err(e).context("writing to stdout"),
    }
}

impl JsonView {
    /// One line, with its newline: within the limit a trace reader takes,
    /// so that a consumer of these lines can read every one (as `report`
    /// reads a recording). The flows of the snapshot and of the analysis
    /// are written by hand (src/model/json_splice.rs): the bytes serde
    /// writes, faster.
    fn encode(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis) -> Result<Vec<u8>> {
        self.encode_within(snap, analysis, MAX_LINE_BYTES - 1)
    }

    /// [`Self::encode`] within `limit` bytes (before the newline). A line
    /// over it lists fewer flows ([`encode_within`] folds the snapshot's),
    /// and the analysis then attributes only the flows the line lists: the
    /// attributions of the flows folded are folded out with them, or the
    /// line would still hold one entry per flow and stay over the limit.
    fn encode_within(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        limit: usize,
    ) -> Result<Vec<u8>> {
        let capacity = self.last_len + self.last_len / 8 + 1024;
        let (mut bytes, _) = encode_within(snap, limit, |snapshot| {
            let listed = listed_attributions(&analysis.flows, snapshot, snap);
            let attributions = |out: &mut Vec<u8>| write_attributions(out, &listed);
            let flows = |out: &mut Vec<u8>| flow_json::write_flows(out, &snapshot.flows);
            let parts = [
                flow_json::FIELD.written_by(&flows),
                attribution_json::FIELD.written_by(&attributions),
            ];
            json_splice::to_json_vec(&WatchLine { snapshot, analysis }, &parts, capacity)
        })
        .context("encoding the interval as JSON")?;
        bytes.push(b'\n');
        self.last_len = bytes.len();
        Ok(bytes)
    }
}

/// The attributions of the flows `listed` lists, in their order and with
/// their ranks: all of them while it lists every flow of `whole` (the
/// snapshot the analysis judged), else those of the flows it still lists.
fn listed_attributions<'a>(
    all: &'a [FlowAttribution],
    listed: &Snapshot,
    whole: &Snapshot,
) -> Cow<'a, [FlowAttribution]> {
    if listed.flows.len() == whole.flows.len() {
        return Cow::Borrowed(all);
    }
    let ids: HashSet<u64> = listed.flows.iter().map(|f| f.id).collect();
    Cow::Owned(
        all.iter()
            .filter(|a| ids.contains(&a.flow_id))
            .cloned()
            .collect(),
    )
}

impl View for JsonView {
    fn show(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis, _: &str) -> Result<Control> {
        let bytes = self.encode(snap, analysis)?;
        write_stdout(&bytes)
    }
}

impl View for PlainView {
    fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        source: &str,
    ) -> Result<Control> {
        let mut text = String::new();
        if source != "live" {
            text.push_str(&format!("[{source}]\n"));
        }
        text.push_str(&table::render(snap, Some(analysis), self.top));
        write_stdout(crate::shared::terminal_text::inert_lines(&text).as_bytes())
    }
}

impl View for SilentView {
    fn show(&mut self, _: &Snapshot, _: &IntervalAnalysis, _: &str) -> Result<Control> {
        Ok(Control::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Thresholds;
    use crate::model::snapshot::FlowSample;

    /// A `--json` line as the view encodes it (the flows of the snapshot
    /// and of the analysis written by hand) is the line serde writes.
    #[test]
    fn a_json_line_is_the_line_serde_writes() {
        let mut snap = Snapshot::example(9);
        snap.flows = (1..4).map(FlowSample::example).collect();
        let analysis = IntervalAnalysis {
            seq: 9,
            mono_ns: 5,
            interfaces: Vec::new(),
            flows: (1..4)
                .map(|rank| FlowAttribution {
                    rank,
                    ..crate::analysis::attribution_json::tests::attributions()[0].clone()
                })
                .collect(),
            episodes: Vec::new(),
            headroom: None,
            kafka: Vec::new(),
        };
        let mut by_serde = serde_json::to_vec(&WatchLine {
            snapshot: &snap,
            analysis: &analysis,
        })
        .unwrap();
        by_serde.push(b'\n');
        let mut view = JsonView::default();
        // Twice: the second starts from the first one's length.
        for _ in 0..2 {
            let line = view.encode(&snap, &analysis).unwrap();
            assert_eq!(
                String::from_utf8(line).unwrap(),
                String::from_utf8(by_serde.clone()).unwrap()
            );
        }
    }

    /// A line over the limit lists fewer flows, and its analysis attributes
    /// only those: the attributions of the flows folded out of the line
    /// are folded out with them, so the line is within the limit and names
    /// no flow it does not list. (They were not: a storm's line kept one
    /// attribution per flow the collector listed, whatever the line
    /// folded.)
    #[test]
    fn a_line_over_the_limit_folds_the_attributions_with_the_flows() {
        let mut snap = Snapshot::example(9);
        snap.flows = (1..=400)
            .map(|id| {
                let mut f = FlowSample::example(id);
                f.delta.bytes_sent = 1000 * id;
                f.delta.segs_out = id;
                f
            })
            .collect();
        let analysis = crate::analysis::analyze(&[], &snap, &Thresholds::default());
        assert_eq!(analysis.flows.len(), 400);
        let whole = JsonView::default().encode(&snap, &analysis).unwrap();
        let limit = whole.len() / 3;
        let line = JsonView::default()
            .encode_within(&snap, &analysis, limit)
            .unwrap();
        assert!(
            line.len() <= limit + 1,
            "a line of {} bytes, over its limit of {limit}",
            line.len()
        );
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        let listed: HashSet<u64> = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_u64().unwrap())
            .collect();
        let attributed: Vec<u64> = v["analysis"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["flow_id"].as_u64().unwrap())
            .collect();
        assert!(
            listed.len() < 400,
            "nothing folded: {} listed",
            listed.len()
        );
        assert!(v["folded"]["flows"][0]["flows"].as_u64().unwrap() > 0);
        // One attribution per flow listed (each of them sent), no other.
        assert_eq!(attributed.len(), listed.len());
        assert!(attributed.iter().all(|id| listed.contains(id)));
        // The busiest kept, in the analysis's order.
        let mut sorted = attributed.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        assert_eq!(attributed, sorted);
    }

    /// `--kafka-role`: the view gets the flows, attributions and by-role
    /// sums of that role; the judgement (verdicts) is the interval's.
    #[test]
    fn a_kafka_filter_narrows_what_the_view_shows_not_the_verdicts() {
        use crate::model::kafka::{KafkaFilter, KafkaFlow, KafkaIdentity, KafkaRole};
        use crate::model::snapshot::FlowCounters;
        let mut snap = Snapshot::example(9);
        snap.interfaces = vec![crate::model::snapshot::InterfaceSample {
            name: "eth0".into(),
            ..Default::default()
        }];
        snap.flows = (1..5)
            .map(|id| FlowSample {
                iface: Some("eth0".into()),
                delta: FlowCounters {
                    bytes_sent: 1000 * id,
                    ..Default::default()
                },
                kafka: (id < 4).then(|| KafkaFlow {
                    who: KafkaIdentity::role(if id == 1 {
                        KafkaRole::Produce
                    } else {
                        KafkaRole::ReplicationToFollower
                    }),
                    ambiguous: Vec::new(),
                }),
                ..FlowSample::example(id)
            })
            .collect();
        let analysis = crate::analysis::analyze(&[], &snap, &Thresholds::default());
        assert!(analysis.kafka.len() >= 2, "{:?}", analysis.kafka);
        let view = KafkaFilteredView::new(
            Box::new(SilentView),
            KafkaFilter::new(&["replication".into()], &[]).unwrap(),
        );
        let (s, a) = view.narrow(&snap, &analysis);
        let ids: Vec<u64> = s.flows.iter().map(|f| f.id).collect();
        assert_eq!(ids, vec![2, 3]);
        assert!(a.flows.iter().all(|f| f.flow_id == 2 || f.flow_id == 3));
        assert!(!a.flows.is_empty());
        assert!(a
            .kafka
            .iter()
            .all(|r| r.who.role == KafkaRole::ReplicationToFollower));
        assert_eq!(a.interfaces, analysis.interfaces);
    }
}
