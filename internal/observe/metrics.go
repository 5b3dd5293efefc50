package observe

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/buildinfo"
)

// Metric names. Labels never carry a tenant, a task id or a raw path:
// each label has a small, bounded set of values.
const (
	MetricAttempts        = "packrun_attempts_total"                // {pack, outcome}
	MetricAttemptDuration = "packrun_attempt_duration_seconds"      // {pack}
	MetricCapBreaches     = "packrun_cap_breaches_total"            // {kind}
	MetricQueueTasks      = "packrun_queue_tasks"                   // {status}, read from the store at scrape time
	MetricDispatchLag     = "packrun_dispatch_lag_seconds"          // available → claimed
	MetricCommitOps       = "packrun_store_commit_ops"              // operations per group commit
	MetricCommitDuration  = "packrun_store_commit_duration_seconds" // BEGIN to COMMIT of a group commit
	MetricHTTPRequests    = "packrun_http_requests_total"           // {route, code}
	MetricHTTPDuration    = "packrun_http_request_duration_seconds" // {route}
	MetricPacksInstalled  = "packrun_packs_installed"               // read from the store at scrape time
	MetricDispatchLock    = "packrun_dispatch_lock_held"            // 1 while this process holds the dispatch lock
	MetricBuildInfo       = "packrun_build_info"                    // 1, {version, revision, go, wazero}
	MetricQuotaUsage      = "packrun_quota_usage_ratio"             // {quota}: the highest usage/limit among the tenants, at scrape time
	MetricQuotaRefusals   = "packrun_quota_refusals_total"          // {quota}: refusals since the host opened
	// Outbound HTTP (http_request), by the granted host as the pack's
	// http grant names it (exact or *.wildcard): never a tenant, never a
	// name the guest chose outside a grant.
	MetricOutboundRequests = "packrun_outbound_requests_total"           // {host, result}
	MetricOutboundBytes    = "packrun_outbound_bytes_total"              // {host, direction}
	MetricOutboundDuration = "packrun_outbound_request_duration_seconds" // {host}
	MetricWitnessRefusals  = "packrun_witness_refusals_total"            // {witness}: checkpoints a witness refused to cosign since serve started
	MetricWitnessSize      = "packrun_witness_cosigned_size"             // {witness}: the size of the newest checkpoint it cosigned
)

// scrapeTimeout bounds the store reads a scrape makes.
const scrapeTimeout = 5 * time.Second

type metrics struct {
	reg             *prometheus.Registry
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	breaches        *prometheus.CounterVec
	lag             prometheus.Histogram
	commitOps       prometheus.Histogram
	commitDuration  prometheus.Histogram
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	lock            prometheus.Gauge
	outRequests     *prometheus.CounterVec
	outBytes        *prometheus.CounterVec
	outDuration     *prometheus.HistogramVec
}

func newMetrics(o *Observer) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAttempts,
			Help: "Attempts run, queued or invoked directly, by pack name and outcome (completed, failed, suspended)."}, []string{"pack", "outcome"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricAttemptDuration,
			Help: "How long attempts ran in the guest, by pack name.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"pack"}),
		breaches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricCapBreaches,
			Help: "Limits attempts hit (cap.breached events), by kind."}, []string{"kind"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricDispatchLag,
			Help: "How long claimed tasks waited between becoming available and being claimed.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		commitOps: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricCommitOps,
			Help: "Write operations carried by each group commit of the store's writer.", Buckets: prometheus.ExponentialBuckets(1, 2, 9)}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricCommitDuration,
			Help: "How long each group commit's transaction took (BEGIN to COMMIT, not the WAL sync).", Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10)}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricHTTPRequests,
			Help: "HTTP requests answered, by route pattern and status code."}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricHTTPDuration,
			Help: "How long HTTP requests took to answer, by route pattern.", Buckets: prometheus.DefBuckets}, []string{"route"}),
		lock: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricDispatchLock,
			Help: "1 while this process holds the store's dispatch lock, 0 while it waits as a standby (on PostgreSQL, where every node dispatches, the lock elects the node running the singleton chores)."}),
		outRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricOutboundRequests,
			Help: "Outbound HTTP requests guests made (http_request) that reached the network, by granted host and result (ok, or the refusal kind)."}, []string{"host", "result"}),
		outBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricOutboundBytes,
			Help: "Body bytes of outbound HTTP requests, by granted host and direction (sent, received)."}, []string{"host", "direction"}),
		outDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricOutboundDuration,
			Help: "How long outbound HTTP requests took, by granted host.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"host"}),
	}
	b := buildinfo.Read()
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricBuildInfo, Help: "The build of this packrun (always 1).",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "go": b.Go, "wazero": b.Wazero}})
	info.Set(1)
	m.reg.MustRegister(m.attempts, m.attemptDuration, m.breaches, m.lag, m.commitOps, m.commitDuration,
		m.requests, m.requestDuration, m.lock, m.outRequests, m.outBytes, m.outDuration, info, newStoreCollector(o),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// statuses are reported even when no task has them, so that a series does
// not vanish when its count drops to zero.
var statuses = []host.TaskStatus{host.TaskPending, host.TaskRunning, host.TaskCompleted, host.TaskRetryableFailure,
	host.TaskPermanentFailure, host.TaskBlocked, host.TaskOperatorCanceled}

// storeCollector reads the queue depth and the installed packs from the
// store when scraped. Before Handler is given a Source it reports nothing.
type storeCollector struct {
	o                                          *Observer
	queueDesc, packsDesc, quotaDesc, refusDesc *prometheus.Desc
	witnessRefusDesc, witnessSizeDesc          *prometheus.Desc
}

// newStoreCollector describes the store's metrics. Like the rest of the
// registry, they are built by observe.New (serve), not when the package is
// initialised: every packrun command links this package.
func newStoreCollector(o *Observer) *storeCollector {
	return &storeCollector{o: o,
		queueDesc:        prometheus.NewDesc(MetricQueueTasks, "Tasks in the queue, by status (read from the store at scrape time).", []string{"status"}, nil),
		packsDesc:        prometheus.NewDesc(MetricPacksInstalled, "Installed pack versions (read from the store at scrape time).", nil, nil),
		quotaDesc:        prometheus.NewDesc(MetricQuotaUsage, "The highest usage of a count quota over its limit among the tenants (no tenant named; 0 for rates and quotas without a limit).", []string{"quota"}, nil),
		refusDesc:        prometheus.NewDesc(MetricQuotaRefusals, "Refusals of each tenant quota since the host opened (no tenant named).", []string{"quota"}, nil),
		witnessRefusDesc: prometheus.NewDesc(MetricWitnessRefusals, "Evidence log checkpoints each witness refused to cosign (a fork, a rollback, an unknown key) since serve started.", []string{"witness"}, nil),
		witnessSizeDesc:  prometheus.NewDesc(MetricWitnessSize, "The size of the newest evidence log checkpoint each witness cosigned.", []string{"witness"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queueDesc
	ch <- c.packsDesc
	ch <- c.quotaDesc
	ch <- c.refusDesc
	ch <- c.witnessRefusDesc
	ch <- c.witnessSizeDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.o.src.Load()
	if src == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if src.Tasks != nil {
		counts, err := src.Tasks(ctx)
		if err != nil {
			c.o.log.Warn("metrics: count tasks", "error", err)
			ch <- prometheus.NewInvalidMetric(c.queueDesc, err)
		} else {
			for _, st := range statuses {
				ch <- prometheus.MustNewConstMetric(c.queueDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
			}
		}
	}
	if src.Quotas != nil {
		for _, u := range src.Quotas(ctx) {
			ch <- prometheus.MustNewConstMetric(c.quotaDesc, prometheus.GaugeValue, u.Ratio, u.Quota)
			ch <- prometheus.MustNewConstMetric(c.refusDesc, prometheus.CounterValue, float64(u.Refusals), u.Quota)
		}
	}
	if src.Witnesses != nil {
		for _, w := range src.Witnesses() {
			ch <- prometheus.MustNewConstMetric(c.witnessRefusDesc, prometheus.CounterValue, float64(w.Refusals), w.URL)
			ch <- prometheus.MustNewConstMetric(c.witnessSizeDesc, prometheus.GaugeValue, float64(w.Size), w.URL)
		}
	}
	if src.Packs != nil {
		n, err := src.Packs(ctx)
		if err != nil {
			c.o.log.Warn("metrics: count packs", "error", err)
			ch <- prometheus.NewInvalidMetric(c.packsDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(c.packsDesc, prometheus.GaugeValue, float64(n))
		}
	}
}
