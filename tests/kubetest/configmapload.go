package kubetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// ConfigMapLoad is a client-go client that writes ConfigMaps at a set
// rate through a kubeconfig and watches them: it creates Keys ConfigMaps
// and then updates them in turn, each write retried until it succeeds or
// RetryFor passes (then it counts as failed); a watch from the first
// list records every resourceVersion it is sent, resumes from the last
// one when the API server ends it, and lists again (a relist) only when
// that version has expired.
type ConfigMapLoad struct {
	// Kubeconfig is the path of the kubeconfig the client uses.
	Kubeconfig string
	// Namespace holds the ConfigMaps (default "default").
	Namespace string
	// Rate is the writes per second (default 20).
	Rate float64
	// Keys is how many ConfigMaps the writes cycle over (default 10).
	Keys int
	// RetryFor bounds one write's retries (default 30 s).
	RetryFor time.Duration
}

// LoadReport is what a ConfigMapLoad measured.
type LoadReport struct {
	// Writes succeeded; Failed did not within RetryFor; Retries is the
	// attempts that returned an error and were tried again.
	Writes, Failed, Retries int
	// LongestGap is the longest time without a successful write, from the
	// start of the load to its end.
	LongestGap time.Duration
	// Events is the watch events received; Missed the successful writes
	// whose resourceVersion no watch event carried; Relists the lists
	// after the watch's resourceVersion expired; Rewatches the watches
	// resumed from the last resourceVersion.
	Events, Missed, Relists, Rewatches int
	// Duration is how long the load ran.
	Duration time.Duration
}

// RowHeader is the header of the rows LoadReport.Row renders.
const RowHeader = "| operation | writes | failed | retries | longest gap | events | missed | relists | rewatches | duration |\n" +
	"|---|---|---|---|---|---|---|---|---|---|"

// Row renders the report as a Markdown table row for operation.
func (r LoadReport) Row(operation string) string {
	return fmt.Sprintf("| %s | %d | %d | %d | %s | %d | %d | %d | %d | %s |", operation, r.Writes, r.Failed, r.Retries,
		r.LongestGap.Round(time.Millisecond), r.Events, r.Missed, r.Relists, r.Rewatches, r.Duration.Round(time.Second))
}

// LoadRun is a running ConfigMapLoad.
type LoadRun struct {
	cancel  context.CancelFunc
	writerD chan struct{}
	stopW   chan struct{}
	watchD  chan error
	// progress is signalled when the watch's highest resourceVersion rises.
	progress chan struct{}
	start    time.Time

	mu      sync.Mutex
	rep     LoadReport
	written map[uint64]bool // resourceVersions of successful writes
	seen    map[uint64]bool // resourceVersions watch events carried
	lastOK  time.Time
	maxSeen uint64
}

// Start lists, starts the watch and the writer, and returns once the
// watch is established. The context bounds the whole run.
func (l ConfigMapLoad) Start(ctx context.Context) (*LoadRun, error) {
	if l.Namespace == "" {
		l.Namespace = "default"
	}
	if l.Rate <= 0 {
		l.Rate = 20
	}
	if l.Keys <= 0 {
		l.Keys = 10
	}
	if l.RetryFor <= 0 {
		l.RetryFor = 30 * time.Second
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubetest: load: kubeconfig %s: %w", l.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = float32(4*l.Rate), int(8*l.Rate), 5*time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubetest: load: client: %w", err)
	}
	cms := cs.CoreV1().ConfigMaps(l.Namespace)
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: load: first list: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &LoadRun{cancel: cancel, writerD: make(chan struct{}), stopW: make(chan struct{}), watchD: make(chan error, 1),
		progress: make(chan struct{}, 1), written: map[uint64]bool{}, seen: map[uint64]bool{}, start: time.Now()}
	r.lastOK = r.start
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("kubetest: load: first watch: %w", err)
	}
	go func() { r.watchD <- r.watch(ctx, cms, w, list.ResourceVersion) }()
	go func() { defer close(r.writerD); r.write(ctx, l, cms) }()
	return r, nil
}

type configMaps interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Get(context.Context, string, metav1.GetOptions) (*corev1.ConfigMap, error)
	List(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// Writes is how many writes have succeeded so far.
func (r *LoadRun) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rep.Writes
}

// Stop ends the writes, waits up to within for the watch to reach the
// last write's resourceVersion, and returns the report.
func (r *LoadRun) Stop(within time.Duration) (LoadReport, error) {
	close(r.stopW)
	<-r.writerD
	end := time.Now()
	r.mu.Lock()
	var last uint64
	for rv := range r.written {
		last = max(last, rv)
	}
	r.mu.Unlock()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
wait:
	for {
		r.mu.Lock()
		caught := r.maxSeen >= last
		r.mu.Unlock()
		if caught {
			break
		}
		select {
		case <-r.progress:
		case <-timeout.C:
			break wait
		case err := <-r.watchD:
			r.watchD <- err
			break wait
		}
	}
	r.cancel()
	err := <-r.watchD
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := r.rep
	rep.Duration = end.Sub(r.start)
	rep.LongestGap = max(rep.LongestGap, end.Sub(r.lastOK))
	for rv := range r.written {
		if !r.seen[rv] {
			rep.Missed++
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return rep, err
	}
	if r.maxSeen < last {
		return rep, fmt.Errorf("kubetest: load: the watch reached resourceVersion %d within %s, the last write was %d", r.maxSeen, within, last)
	}
	return rep, nil
}

// write creates the ConfigMaps, then updates them in turn, at the rate.
func (r *LoadRun) write(ctx context.Context, l ConfigMapLoad, cms configMaps) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / l.Rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-r.stopW:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("load-%d", i%l.Keys)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Namespace}, Data: map[string]string{"n": strconv.Itoa(i)}}
		rv, ok := r.retry(ctx, l.RetryFor, func(ctx context.Context) (string, error) {
			if i < l.Keys {
				got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					// An attempt that timed out on the client had succeeded.
					got, err = cms.Get(ctx, name, metav1.GetOptions{})
				}
				if err != nil {
					return "", err
				}
				return got.ResourceVersion, nil
			}
			got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
			if err != nil {
				return "", err
			}
			return got.ResourceVersion, nil
		})
		now := time.Now()
		r.mu.Lock()
		if ok {
			r.rep.Writes++
			r.rep.LongestGap = max(r.rep.LongestGap, now.Sub(r.lastOK))
			r.lastOK = now
			if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
				r.written[n] = true
			}
		} else if ctx.Err() == nil {
			r.rep.Failed++
		}
		r.mu.Unlock()
	}
}

// retry runs op until it succeeds or within passes, counting the retries.
func (r *LoadRun) retry(ctx context.Context, within time.Duration, op func(context.Context) (string, error)) (string, bool) {
	deadline := time.Now().Add(within)
	backoff := 50 * time.Millisecond
	for {
		rv, err := op(ctx)
		if err == nil {
			return rv, true
		}
		if ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			return "", false
		}
		r.mu.Lock()
		r.rep.Retries++
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// watch records every event's resourceVersion, resuming from the last one
// when the server ends the watch and relisting when it expired.
func (r *LoadRun) watch(ctx context.Context, cms configMaps, w watch.Interface, rv string) error {
	for {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					rv = ""
				}
				continue
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			rv = cm.ResourceVersion
			n, _ := strconv.ParseUint(rv, 10, 64)
			r.mu.Lock()
			if ev.Type != watch.Bookmark {
				r.rep.Events++
				r.seen[n] = true
			}
			if n > r.maxSeen {
				r.maxSeen = n
				select {
				case r.progress <- struct{}{}:
				default:
				}
			}
			r.mu.Unlock()
		}
		w.Stop()
		for {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var err error
			if rv == "" {
				var list *corev1.ConfigMapList
				if list, err = cms.List(ctx, metav1.ListOptions{}); err == nil {
					rv = list.ResourceVersion
					r.mu.Lock()
					r.rep.Relists++
					r.mu.Unlock()
				}
			}
			if err == nil {
				w, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			}
			if err == nil {
				r.mu.Lock()
				r.rep.Rewatches++
				r.mu.Unlock()
				break
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = ""
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}
