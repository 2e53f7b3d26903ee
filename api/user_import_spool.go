package api

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// An import's body goes to a spool file as it arrives, and the import reads
// the file while it is still being written: the upload, the validation in Go
// and PostgreSQL's COPY overlap instead of following one another (a first
// import of a million users spent a third of its time spooling before this).
// A client holds a database connection only while it keeps up: the import
// starts once importStartBytes have come (or the whole body, if smaller), and
// when, in all, it has waited importMaxWait for the body's next bytes, it
// gives up (errSlowUpload: its transaction is rolled back, the connection
// returned) and starts again from the spool once the body has ended. A slow
// client so holds a file, as before, and a connection for at most
// importMaxWait of idleness.
const (
	importStartBytes = 1 << 20
	importMaxWait    = time.Second
)

// errSlowUpload ends an import that waited importMaxWait for its body.
var errSlowUpload = errors.New("the body arrives slower than the import reads it")

// importSpool is an import's body on disk: fill writes it as it arrives,
// readers read what has been written, waiting for more until it has ended.
type importSpool struct {
	f  *os.File
	mu sync.Mutex
	// size is how much has been written; done says the body has ended, err how
	// (nil: read to its end; *http.MaxBytesError, a read or write error).
	size int64
	done bool
	err  error
	// grew is closed, and replaced, whenever size or done changes.
	grew chan struct{}
	// discard: the import has ended (refused): the rest of the body is read,
	// as an answer needs, but not written.
	discard atomic.Bool
}

func newImportSpool(f *os.File) *importSpool {
	return &importSpool{f: f, grew: make(chan struct{})}
}

// fill copies body to the spool until it ends.
func (s *importSpool) fill(body io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 && !s.discard.Load() {
			if _, werr := s.f.Write(buf[:n]); werr != nil {
				s.finish(werr)
				return
			}
			s.mu.Lock()
			s.size += int64(n)
			s.signal()
			s.mu.Unlock()
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			s.finish(err)
			return
		}
	}
}

func (s *importSpool) finish(err error) {
	s.mu.Lock()
	s.done, s.err = true, err
	s.signal()
	s.mu.Unlock()
}

// signal wakes the readers; s.mu is held.
func (s *importSpool) signal() {
	close(s.grew)
	s.grew = make(chan struct{})
}

// spoolState is a moment of an importSpool: what has been written, whether
// the body has ended (and how), and the channel closed at the next change.
type spoolState struct {
	size int64
	done bool
	err  error
	grew <-chan struct{}
}

func (s *importSpool) state() spoolState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return spoolState{s.size, s.done, s.err, s.grew}
}

// waitFor waits until n bytes have been written or the body has ended.
func (s *importSpool) waitFor(n int64) {
	for {
		st := s.state()
		if st.done || st.size >= n {
			return
		}
		<-st.grew
	}
}

// ended waits for the body's end and returns its error.
func (s *importSpool) ended() error {
	for {
		st := s.state()
		if st.done {
			return st.err
		}
		<-st.grew
	}
}

// spoolReader reads an importSpool from its start, waiting for what has not
// been written yet; the waits of all the readers of one import attempt draw
// on one allowance (*wait), past which Read answers errSlowUpload.
type spoolReader struct {
	s    *importSpool
	off  int64
	wait *time.Duration
}

func (r *spoolReader) Read(p []byte) (int, error) {
	for {
		st := r.s.state()
		if r.off < st.size {
			if rest := st.size - r.off; int64(len(p)) > rest {
				p = p[:rest]
			}
			n, err := r.s.f.ReadAt(p, r.off)
			r.off += int64(n)
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		if st.done {
			if st.err != nil {
				return 0, st.err
			}
			return 0, io.EOF
		}
		if *r.wait <= 0 {
			return 0, errSlowUpload
		}
		start := time.Now()
		t := time.NewTimer(*r.wait)
		select {
		case <-st.grew:
		case <-t.C:
		}
		t.Stop()
		*r.wait -= time.Since(start)
	}
}
