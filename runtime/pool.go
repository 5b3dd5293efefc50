package runtime

import (
	"context"
	"sync"
)

// pool keeps fresh instances prepared ahead of time so an invocation does not
// wait for instantiation. A background filler tops up `ready`; when it is
// empty the caller instantiates one itself, so throughput scales with
// callers. Instances taken from the pool are never put back, except in
// reuse mode where a clean instance goes to `idle`.
type pool struct {
	m     *Module
	ready chan *instance
	idle  chan *instance
	stop  chan struct{}
	start sync.Once
	wg    sync.WaitGroup
}

func newPool(m *Module, size int) *pool {
	p := &pool{m: m, ready: make(chan *instance, size), stop: make(chan struct{})}
	if m.reuse {
		p.idle = make(chan *instance, max(size, 1))
	}
	return p
}

func (p *pool) get(ctx context.Context) (*instance, error) {
	if p.idle != nil {
		select {
		case inst := <-p.idle:
			return inst, nil
		default:
		}
	}
	if cap(p.ready) > 0 {
		p.start.Do(func() {
			p.wg.Add(1)
			go p.fill()
		})
		select {
		case inst := <-p.ready:
			return inst, nil
		default:
		}
	}
	return p.m.newInstance(ctx)
}

// put returns a used instance: kept for reuse when allowed, closed otherwise.
func (p *pool) put(inst *instance, reusable bool) {
	if reusable && p.idle != nil {
		select {
		case p.idle <- inst:
			return
		default:
		}
	}
	inst.close()
}

func (p *pool) fill() {
	defer p.wg.Done()
	for {
		inst, err := p.m.newInstance(context.Background())
		if err != nil {
			// Initialisation succeeded at load, so this is a module whose
			// start-up is not repeatable; callers will see the error when
			// they instantiate themselves.
			return
		}
		select {
		case p.ready <- inst:
		case <-p.stop:
			inst.close()
			return
		}
	}
}

func (p *pool) close() {
	close(p.stop)
	p.wg.Wait()
	for {
		select {
		case inst := <-p.ready:
			inst.close()
		default:
			if p.idle != nil {
				select {
				case inst := <-p.idle:
					inst.close()
					continue
				default:
				}
			}
			return
		}
	}
}
