package sim

import "sync"

// workers runs submitted jobs in FIFO order on n goroutines. With n = 1 it is
// the front end's shared event loop: one goroutine that tokenizes (unless a
// tokenizer pool is configured), detokenizes and frames every stream, so a
// slow job delays every job queued behind it, as a blocked asyncio loop does.
// With n > 1 it is the tokenizer pool.
//
// The queue is unbounded so that the engine never blocks on a stalled loop
// (it does not in real stacks either); the owner stops it with stop.
type workers struct {
	mu      sync.Mutex
	jobs    []func()
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
}

func newWorkers(n int) *workers {
	w := &workers{
		wake: make(chan struct{}, n),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	w.wg.Add(n)
	for range n {
		go w.run()
	}
	go func() {
		w.wg.Wait()
		close(w.done)
	}()
	return w
}

// submit queues job; it reports false once the workers are stopping.
func (w *workers) submit(job func()) bool {
	select {
	case <-w.quit:
		return false
	default:
	}
	w.mu.Lock()
	w.jobs = append(w.jobs, job)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default: // every worker already has a wake-up pending
	}
	return true
}

// do runs job on a worker and waits for it; it reports false if the workers
// stopped before job ran.
func (w *workers) do(job func()) bool {
	ran := make(chan struct{})
	if !w.submit(func() { job(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-w.done:
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
}

func (w *workers) run() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		var job func()
		if len(w.jobs) > 0 {
			job = w.jobs[0]
			w.jobs[0] = nil
			w.jobs = w.jobs[1:]
		}
		w.mu.Unlock()
		if job != nil {
			job()
			select {
			case <-w.quit:
				return
			default:
			}
			continue
		}
		select {
		case <-w.wake:
		case <-w.quit:
			return
		}
	}
}

// stop makes the workers exit after their current job and waits for them.
// Jobs still queued are dropped.
func (w *workers) stop() {
	w.stopped.Do(func() { close(w.quit) })
	<-w.done
}
