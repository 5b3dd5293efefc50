//go:build linux

package pgbench

import (
	"errors"
	"io"
	"net"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// delayProxy forwards TCP connections from a loopback listener to target,
// holding every chunk of bytes it reads for delay before writing it on, in
// each direction: a simulated one-way network latency (this kernel has no
// netem). Each direction of each connection is a reader goroutine that
// stamps what it reads with its due time and queues it; one scheduler, on
// a thread of its own, sleeps until the oldest chunk is due and writes
// every chunk that is. Every chunk has the same delay, so one queue in
// reading order is also in due order: order is kept on each connection,
// and chunks are written as they were read, not merged, so a request and
// its answer each pay the delay. Bytes read while earlier ones wait are
// queued behind them (a link's latency, not its bandwidth).
//
// One sleeping thread for the whole proxy, instead of one per waiting
// chunk, keeps the simulation's own CPU (thread switches, the Go runtime
// handing processors to and from sleeping threads) off the two cores the
// nodes and the database share: it is a cost a real network would not put
// on them.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration
	wg     sync.WaitGroup // accept and the readers
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	qmu   sync.Mutex
	queue []chunk // in reading order, so in due order
	wake  chan struct{}
	stop  chan struct{}
	ended chan struct{} // closed when the scheduler returns
}

// flights counts the chunks every proxy read from its clients: pgx writes
// each request, or each pipeline of them, at once, so a chunk is one
// network flight, the start of a round trip (BenchmarkPGRoundTrip's
// flights/job).
var flights atomic.Int64

// startProxy listens on 127.0.0.1 and forwards to target with delay each
// way; the proxy is closed when tb ends.
func startProxy(tb testing.TB, target string, delay time.Duration) *delayProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &delayProxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), ended: make(chan struct{})}
	go p.schedule()
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the address to connect to instead of target.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every forwarded connection and waits for
// their goroutines and the scheduler.
func (p *delayProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait() // each reader waits for its end to be passed on
	close(p.stop)
	<-p.ended
}

func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		if !p.track(down) || !p.track(up) {
			down.Close()
			up.Close()
			return
		}
		for _, c := range []net.Conn{down, up} {
			c.(*net.TCPConn).SetNoDelay(true)
		}
		p.wg.Add(2)
		go p.read(&lane{dst: up, src: down}, &flights)
		go p.read(&lane{dst: down, src: up}, nil)
	}
}

// lane is one direction of one forwarded connection.
type lane struct {
	dst, src net.Conn
	broken   bool // a write to dst failed: what follows is dropped (scheduler only)
}

// chunk is bytes read on a lane, or (end non-nil) the end of its source.
type chunk struct {
	due    time.Time
	l      *lane
	b      []byte
	end    chan struct{} // closed once the end is passed on
	failed bool          // the source failed rather than ended: close dst
}

func (p *delayProxy) enqueue(c chunk) {
	p.qmu.Lock()
	p.queue = append(p.queue, c)
	p.qmu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// read queues what src sends, counting the chunks in count (if not nil),
// then its end, and waits until that end is passed on.
func (p *delayProxy) read(l *lane, count *atomic.Int64) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	failed := false
	for {
		n, err := l.src.Read(buf)
		if n > 0 {
			if count != nil {
				count.Add(1)
			}
			p.enqueue(chunk{due: time.Now().Add(p.delay), l: l, b: append([]byte(nil), buf[:n]...)})
		}
		if err != nil {
			failed = !errors.Is(err, io.EOF)
			break
		}
	}
	end := make(chan struct{})
	p.enqueue(chunk{due: time.Now().Add(p.delay), l: l, end: end, failed: failed})
	<-end
}

// schedule writes each queued chunk once it is due, on one thread (see
// sleepUntil), until the proxy closes.
func (p *delayProxy) schedule() {
	defer close(p.ended)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	syscall.Syscall(syscall.SYS_PRCTL, syscall.PR_SET_TIMERSLACK, 1, 0)
	var due []chunk
	for {
		p.qmu.Lock()
		if len(p.queue) == 0 {
			p.qmu.Unlock()
			select {
			case <-p.wake:
				continue
			case <-p.stop:
				return
			}
		}
		first := p.queue[0].due
		p.qmu.Unlock()
		sleepUntil(first)
		now := time.Now()
		p.qmu.Lock()
		n := 0
		for n < len(p.queue) && !p.queue[n].due.After(now) {
			n++
		}
		due = append(due[:0], p.queue[:n]...)
		p.queue = append(p.queue[:0], p.queue[n:]...)
		p.qmu.Unlock()
		for i := range due {
			p.pass(&due[i])
			due[i] = chunk{}
		}
	}
}

// pass writes a due chunk, or passes its source's end on.
func (p *delayProxy) pass(c *chunk) {
	l := c.l
	if c.end != nil {
		if c.failed || l.broken {
			l.dst.Close()
		} else if tc, ok := l.dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		close(c.end)
		return
	}
	if l.broken {
		return
	}
	if _, err := l.dst.Write(c.b); err != nil {
		l.broken = true
		l.src.Close()
	}
}

// sleepUntil blocks the calling thread until t with nanosleep (the
// scheduler's thread has a timer slack of 1 ns): the Go runtime's timers
// wake sub-millisecond sleeps after ≈ 1.1 ms on Linux when the process is
// idle, which would turn a 0.25 ms delay into 1 ms. No CPU is spent
// spinning.
func sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
}

// pingPong returns the median of n round trips of one byte through addr to
// an echo server.
func pingPong(t *testing.T, addr string, n int) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	rtts := make([]time.Duration, n)
	b := []byte{1}
	for i := range rtts {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rtts[i] = time.Since(start)
	}
	return median(rtts)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDelayProxyAddsRoundTrip: a ping-pong through the proxy takes at
// least the two one-way delays it adds, and bytes come back in order.
// Only a lower bound is asserted: a busy machine may make it slower,
// never faster.
func TestDelayProxyAddsRoundTrip(t *testing.T) {
	const oneWay = 250 * time.Microsecond
	echo := echoServer(t)
	p := startProxy(t, echo, oneWay)
	direct := pingPong(t, echo, 50)
	proxied := pingPong(t, p.Addr(), 50)
	t.Logf("median round trip: direct %v, through the proxy %v (claimed +%v)", direct, proxied, 2*oneWay)
	if proxied < 2*oneWay {
		t.Errorf("round trip through the proxy %v, want at least %v", proxied, 2*oneWay)
	}

	// Order kept across many chunks written back to back.
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 256<<10)
	for i := range want {
		want[i] = byte(i * 7)
	}
	go func() {
		for i := 0; i < len(want); i += 1000 {
			c.Write(want[i:min(i+1000, len(want))])
		}
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("byte %d: got %d, want %d (order not kept)", i, got[i], want[i])
		}
	}
}

// TestDelayProxyClose: with no delay the proxy still forwards, and a
// closed side ends the other (no goroutine is left: Close returns).
func TestDelayProxyClose(t *testing.T) {
	echo := echoServer(t)
	p := startProxy(t, echo, 0)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "hi" {
		t.Fatalf("echo through the proxy: %q, %v", b, err)
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(b); err == nil {
		t.Fatalf("read %d bytes after the proxy closed, want the connection ended", n)
	}
}
