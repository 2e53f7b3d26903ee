package main

import (
	"fmt"

	sdkworker "go.temporal.io/sdk/worker"
)

// workerSlot is one of the bench's in-process workers: the empty workflow's
// ("bench") and, in self-host mode, Herald's ("herald": one SDK worker per priority
// lane, as cmd/herald runs it). A stopped SDK worker cannot start again, so a slot
// makes new ones from its factory.
type workerSlot struct {
	make func() []sdkworker.Worker
	ws   []sdkworker.Worker // running, or nil
}

// addWorker registers a worker and starts it, unless -workers-after-b holds every
// worker back until (b) is over.
func (b *bench) addWorker(name string, make func() []sdkworker.Worker) {
	b.workers[name] = &workerSlot{make: make}
	if b.o.workersAfterB && b.selfHost {
		return
	}
	if err := b.startWorker(name); err != nil && b.setupErr == nil {
		b.setupErr = err
	}
}

// startWorker starts the named worker if it is not running.
func (b *bench) startWorker(name string) error {
	slot := b.workers[name]
	if slot == nil || slot.ws != nil {
		return nil
	}
	ws := slot.make()
	for i, w := range ws {
		if err := w.Start(); err != nil {
			for _, started := range ws[:i] {
				started.Stop()
			}
			return fmt.Errorf("start %s worker: %w", name, err)
		}
	}
	slot.ws = ws
	return nil
}

// startWorkers starts every worker not running.
func (b *bench) startWorkers() error {
	for _, name := range []string{"bench", "herald"} {
		if err := b.startWorker(name); err != nil {
			return err
		}
	}
	return nil
}

// stopWorker stops the named worker (waiting for its running activities).
func (b *bench) stopWorker(name string) {
	if slot := b.workers[name]; slot != nil && slot.ws != nil {
		for _, w := range slot.ws {
			w.Stop()
		}
		slot.ws = nil
	}
}

func (b *bench) stopAllWorkers() {
	for name := range b.workers {
		b.stopWorker(name)
	}
}
