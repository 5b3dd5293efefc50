package packrun_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// benchSubscribe makes the hello pack's node a subscriber of crisis.*
// (an operator route for message:example.hello and the subscription), as
// installing a pack whose node declares "subscribes" would.
func benchSubscribe(b *testing.B, h *packrun.Host) {
	ctx := context.Background()
	st := h.Store()
	tt := host.SubscriberTaskType("example.hello")
	if err := st.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: benchPackName, Node: "example.hello"}); err != nil {
		b.Fatal(err)
	}
	if err := st.SetPackSubscriptions(ctx, benchPackName, []host.Subscription{{Pack: benchPackName, Node: "example.hello", TaskType: tt, Topics: []string{"crisis.*"}}}); err != nil {
		b.Fatal(err)
	}
}

var benchMessageN atomic.Int64

// benchCrises returns n new seed-002 crisis.detection messages (about
// 2.5 KB each), made before the timer starts.
func benchCrises(n int) [][]byte {
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = messagetest.Crisis(messagetest.BusID(int(benchMessageN.Add(1))), "emotion_recognition")
	}
	return docs
}

// benchPostMessage POSTs doc and checks it was accepted with one
// subscriber task.
func benchPostMessage(client *http.Client, url string, doc []byte) error {
	resp, err := client.Post(url+"/v1/messages", "application/json; profile=bus-envelope", bytes.NewReader(doc))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !bytes.Contains(body, []byte(`"tasks":["task_`)) {
		return fmt.Errorf("POST /v1/messages: %d %s", resp.StatusCode, body)
	}
	return nil
}

// BenchmarkPostMessage: POST /v1/messages of distinct seed-002 messages
// through a real HTTP server, 16 clients per core; each is decoded,
// checked, hashed and accepted durably with the task of its one
// subscriber (the dispatcher is not running: the tasks wait). Beside it,
// BenchmarkTaskRoundTrip is the queue round trip.
func BenchmarkPostMessage(b *testing.B) {
	h := benchHost(b, b, 1)
	benchSubscribe(b, h)
	url, client := benchServer(b, h)
	if err := benchPostMessage(client, url, benchCrises(1)[0]); err != nil {
		b.Fatal(err)
	}
	docs := benchCrises(b.N)
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchPostMessage(client, url, docs[next.Add(1)-1]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkMessageLatency: with the dispatcher running, one client POSTs a
// message and waits until its subscriber's task has completed, then sends
// the next; publish-to-subscriber-task latency is from the POST to the
// task's start (its started_at, stamped by the store when it is claimed),
// p50 and p99 over the run.
func BenchmarkMessageLatency(b *testing.B) {
	h := benchHost(b, b, 1)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			b.Error(err)
		}
	}()
	for !h.Dispatching() { // Run's start-up routing would drop the subscription
		time.Sleep(time.Millisecond)
	}
	benchSubscribe(b, h)
	url, client := benchServer(b, h)
	st := h.Store()
	send := func() (time.Duration, error) {
		n := int(benchMessageN.Add(1))
		doc := messagetest.Crisis(messagetest.BusID(n), "emotion_recognition")
		t0 := time.Now()
		resp, err := client.Post(url+"/v1/messages?", "application/json; profile=bus-envelope", bytes.NewReader(doc))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("POST: %d", resp.StatusCode)
		}
		m, err := st.Message(ctx, "", messagetest.BusID(n))
		if err != nil || len(m.Deliveries) != 1 {
			return 0, fmt.Errorf("message: %v", err)
		}
		id := m.Deliveries[0].TaskID
		if err := benchAwait(ctx, st, []string{id}, time.Minute); err != nil {
			return 0, err
		}
		t, err := st.Task(ctx, id)
		if err != nil || t.Status != host.TaskCompleted || t.StartedAt == nil {
			return 0, fmt.Errorf("subscriber task %s: %v %+v", id, err, t)
		}
		return t.StartedAt.Sub(t0), nil
	}
	for range 10 { // warm the module, the connection and the pool
		if _, err := send(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		d, err := send()
		if err != nil {
			b.Fatal(err)
		}
		lat[i] = d
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
