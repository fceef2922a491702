//! The HTTP requests' count and duration (`packyard_http_requests_total`,
//! `packyard_http_request_duration_seconds`), kept per thread and summed when scraped.
//!
//! Every request is counted and timed, by every worker thread at once. Prometheus's own counter
//! and histogram are one set of atomics per series that every thread adds to: with a series
//! shared by the workers, each request moves their cache lines from one core to another (on the
//! 2-core host of docs/perf/ceiling.md this measured neutral; it is meant for hosts with more
//! cores, where it was not measured). Here each thread has its own cells per series
//! ([`Cells`]), which only it writes — with a plain load and store, no read-modify-write — and
//! a scrape adds up every thread's cells ([`Series::collect`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{self, Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

const COUNT: &str = "packyard_http_requests_total";
const COUNT_HELP: &str = "HTTP requests answered, by repository, format, method and status";
const TIME: &str = "packyard_http_request_duration_seconds";
const TIME_HELP: &str = "Time from request head to response head, by repository, format and method";

/// The histogram's upper bounds, in seconds.
pub const BOUNDS: [f64; 15] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// [`BOUNDS`] in nanoseconds, for the request path's comparisons.
const BOUNDS_NANOS: [u64; 15] = {
    let mut nanos = [0; 15];
    let mut i = 0;
    while i < BOUNDS.len() {
        nanos[i] = (BOUNDS[i] * 1e9) as u64;
        i += 1;
    }
    nanos
};

/// One thread's requests of one series: written by that thread alone, read by scrapes.
#[derive(Default)]
struct Cells {
    count: AtomicU64,
    nanos: AtomicU64,
    /// Requests per bucket: `[i]` those within `BOUNDS[i]` and over the bound before (not
    /// cumulative; a scrape adds them up). Slower ones are in `count` alone.
    buckets: [AtomicU64; BOUNDS.len()],
}

impl Cells {
    /// Adds one request. Only the owning thread calls this, so a load and a store suffice. The
    /// bucket is written last, with `Release`: a scrape that sees it sees the count too.
    fn add(&self, elapsed: Duration) {
        fn bump(cell: &AtomicU64, by: u64, order: Ordering) {
            cell.store(cell.load(Relaxed).wrapping_add(by), order);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        bump(&self.count, 1, Relaxed);
        bump(&self.nanos, nanos, Relaxed);
        if let Some(i) = BOUNDS_NANOS.iter().position(|&bound| nanos <= bound) {
            bump(&self.buckets[i], 1, Release);
        }
    }

    /// What the cells hold now: the buckets read first (`Acquire`), so that no bucket counts a
    /// request the count leaves out.
    fn read(&self) -> Sum {
        let mut sum = Sum::default();
        for (n, cell) in sum.buckets.iter_mut().zip(&self.buckets) {
            *n = cell.load(Acquire);
        }
        sum.nanos = self.nanos.load(Relaxed);
        sum.count = self.count.load(Relaxed);
        sum
    }
}

/// A series' label values.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Labels {
    repository: String,
    format: String,
    method: &'static str,
    status: u16,
}

/// A thread's resolved cells, by registry ([`Series`]'s id), repository id (0: none), method
/// and status.
type Key = (u64, i64, &'static str, u16);

thread_local! {
    /// The cells this thread made, by [`Key`]: a request hashes three integers, not its labels.
    static MINE: RefCell<hashbrown::HashMap<Key, Arc<Cells>>> = RefCell::new(hashbrown::HashMap::new());
}

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The two HTTP metrics of one registry.
pub struct Series {
    /// Tells this registry's cells apart in the threads' maps (tests run several on a thread).
    id: u64,
    /// Every thread's cells, with their labels.
    cells: Mutex<Kept>,
    descs: Vec<Desc>,
}

impl Series {
    pub fn new() -> Result<Self, prometheus::Error> {
        let labels = |names: &[&str]| names.iter().map(|n| (*n).to_string()).collect::<Vec<_>>();
        let descs = vec![
            Desc::new(
                COUNT.into(),
                COUNT_HELP.into(),
                labels(&["repository", "format", "method", "status"]),
                Default::default(),
            )?,
            Desc::new(TIME.into(), TIME_HELP.into(), labels(&["repository", "format", "method"]), Default::default())?,
        ];
        Ok(Self { id: NEXT_ID.fetch_add(1, Relaxed), cells: Mutex::default(), descs })
    }

    /// Counts and times one request: `repository` (id and name; 0 and "" for none), `format`,
    /// `method`, `status`.
    pub fn observe(
        &self,
        (repository_id, repository, format): (i64, &str, &str),
        method: &'static str,
        status: u16,
        elapsed: Duration,
    ) {
        let key = (self.id, repository_id, method, status);
        let make = || {
            let labels = Labels { repository: repository.into(), format: format.into(), method, status };
            let cells = Arc::new(Cells::default());
            self.cells.lock().unwrap_or_else(PoisonError::into_inner).live.push((labels, cells.clone()));
            cells
        };
        let kept = MINE.try_with(|mine| {
            let mut mine = mine.borrow_mut();
            if let Some(cells) = mine.get(&key) {
                cells.add(elapsed);
                return;
            }
            // A bound against many repositories (ids are never reused); what the dropped
            // cells counted is kept in `self.cells` (added up once no thread holds them).
            if mine.len() >= 10_000 {
                mine.clear();
            }
            let cells = make();
            cells.add(elapsed);
            mine.insert(key, cells);
        });
        if kept.is_err() {
            // The thread is ending and its map is gone: cells of their own, written once.
            make().add(elapsed);
        }
    }

    /// Every thread's cells added up per series. Cells no thread holds any more (its thread
    /// ended, or cleared its map) are added to what is retired and let go.
    fn sums(&self) -> (BTreeMap<Labels, u64>, BTreeMap<Labels, Sum>) {
        let mut kept = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        let Kept { live, retired } = &mut *kept;
        live.retain(|(labels, cells)| {
            if Arc::strong_count(cells) > 1 {
                return true;
            }
            // Pairs with the owner's `Release` in dropping its `Arc`: its last writes are seen.
            std::sync::atomic::fence(Acquire);
            retired.entry(labels.clone()).or_default().add(&cells.read());
            false
        });
        let mut counts = BTreeMap::<Labels, u64>::new();
        let mut times = BTreeMap::<Labels, Sum>::new();
        let now = live.iter().map(|(labels, cells)| (labels, cells.read()));
        for (labels, sum) in retired.iter().map(|(l, s)| (l, s.clone())).chain(now) {
            *counts.entry(labels.clone()).or_default() += sum.count;
            times.entry(Labels { status: 0, ..labels.clone() }).or_default().add(&sum);
        }
        (counts, times)
    }
}

/// The cells of the threads that may still write them, and what the others counted.
#[derive(Default)]
struct Kept {
    live: Vec<(Labels, Arc<Cells>)>,
    retired: BTreeMap<Labels, Sum>,
}

#[derive(Default, Clone)]
struct Sum {
    count: u64,
    nanos: u64,
    buckets: [u64; BOUNDS.len()],
}

impl Sum {
    fn add(&mut self, other: &Sum) {
        self.count += other.count;
        self.nanos = self.nanos.wrapping_add(other.nanos);
        for (n, m) in self.buckets.iter_mut().zip(other.buckets) {
            *n += m;
        }
    }
}

fn label(name: &str, value: &str) -> proto::LabelPair {
    let mut pair = proto::LabelPair::default();
    pair.set_name(name.into());
    pair.set_value(value.into());
    pair
}

fn family(name: &str, help: &str, kind: MetricType) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.into());
    family.set_help(help.into());
    family.set_field_type(kind);
    family
}

impl Collector for Series {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (counts, times) = self.sums();
        let mut count_family = family(COUNT, COUNT_HELP, MetricType::COUNTER);
        for (l, count) in counts {
            let mut metric = proto::Metric::default();
            // By name, as the text format lists them.
            metric.set_label(vec![
                label("format", &l.format),
                label("method", l.method),
                label("repository", &l.repository),
                label("status", &l.status.to_string()),
            ]);
            let mut counter = proto::Counter::default();
            counter.set_value(count as f64);
            metric.set_counter(counter);
            count_family.mut_metric().push(metric);
        }
        let mut time_family = family(TIME, TIME_HELP, MetricType::HISTOGRAM);
        for (l, sum) in times {
            let mut metric = proto::Metric::default();
            metric.set_label(vec![
                label("format", &l.format),
                label("method", l.method),
                label("repository", &l.repository),
            ]);
            let mut histogram = proto::Histogram::default();
            histogram.set_sample_count(sum.count);
            histogram.set_sample_sum(sum.nanos as f64 / 1e9);
            let mut cumulative = 0;
            let buckets = BOUNDS
                .iter()
                .zip(sum.buckets)
                .map(|(bound, n)| {
                    cumulative += n;
                    let mut bucket = proto::Bucket::default();
                    bucket.set_upper_bound(*bound);
                    bucket.set_cumulative_count(cumulative);
                    bucket
                })
                .collect();
            histogram.set_bucket(buckets);
            metric.set_histogram(histogram);
            time_family.mut_metric().push(metric);
        }
        vec![count_family, time_family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(series: &Series) -> anyhow::Result<String> {
        let mut out = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &series.collect(), &mut out)?;
        Ok(String::from_utf8(out)?)
    }

    #[test]
    fn every_threads_requests_are_added_up_per_series() -> anyhow::Result<()> {
        let series = Arc::new(Series::new()?);
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let series = series.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        // 0.4 ms, 2 ms and 40 s: the first bucket, the third, none.
                        let elapsed = Duration::from_micros([400, 2_000, 40_000_000][(i % 3) as usize]);
                        series.observe((7, "debs", "apt"), "GET", 200, elapsed);
                    }
                    series.observe((0, "", ""), "POST", 201 + t, Duration::from_millis(1));
                })
            })
            .collect();
        for t in threads {
            t.join().map_err(|_| anyhow::anyhow!("a thread panicked"))?;
        }
        let text = render(&series)?;
        // The threads ended: their cells were added to what is retired and let go, and the
        // next scrape says the same.
        assert!(series.cells.lock().map(|k| k.live.is_empty()).unwrap_or(false), "cells of ended threads are kept");
        assert_eq!(render(&series)?, text);
        for line in [
            r#"packyard_http_requests_total{format="apt",method="GET",repository="debs",status="200"} 3000"#,
            r#"packyard_http_requests_total{format="",method="POST",repository="",status="203"} 1"#,
            r#"packyard_http_request_duration_seconds_bucket{format="apt",method="GET",repository="debs",le="0.0005"} 1002"#,
            r#"packyard_http_request_duration_seconds_bucket{format="apt",method="GET",repository="debs",le="0.0025"} 2001"#,
            r#"packyard_http_request_duration_seconds_bucket{format="apt",method="GET",repository="debs",le="30"} 2001"#,
            r#"packyard_http_request_duration_seconds_bucket{format="apt",method="GET",repository="debs",le="+Inf"} 3000"#,
            r#"packyard_http_request_duration_seconds_count{format="apt",method="GET",repository="debs"} 3000"#,
            r#"packyard_http_request_duration_seconds_sum{format="",method="POST",repository=""} 0.003"#,
            r#"packyard_http_request_duration_seconds_count{format="",method="POST",repository=""} 3"#,
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
        }
        // 1002 × 0.4 ms + 999 × 2 ms + 999 × 40 s (the thread's i % 3 over 0..1000, three threads).
        let sum = text
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    r#"packyard_http_request_duration_seconds_sum{format="apt",method="GET",repository="debs"} "#,
                )
            })
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_default();
        assert!((sum - (1002.0 * 0.0004 + 999.0 * 0.002 + 999.0 * 40.0)).abs() < 1e-6, "{sum}");
        Ok(())
    }
}
