package providertest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is Herald's module path; RepoRoot looks for its go.mod.
const Module = "github.com/herald-notify/herald"

// Spec file names in the shared provider-specs folder.
const (
	SpecSendGridMail = "sendgrid_mail_v3.json"
	SpecTwilioAPI    = "twilio_api_v2010.json"
)

const setupHint = "the provider specs live in ../shared/provider-specs beside the repository " +
	"(HERALD_PROVIDER_SPECS overrides the folder); Prism is installed by `npm ci` at the repository root"

// RepoRoot returns the repository root: the nearest parent of the working directory
// whose go.mod declares Herald's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+Module)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod for %s above the working directory", Module)
		}
		dir = parent
	}
}

// SpecPath returns the absolute path of a provider OpenAPI spec: in
// $HERALD_PROVIDER_SPECS when set, else in ../shared/provider-specs from the repo
// root. A missing file is an error that says where it was looked for.
func SpecPath(name string) (string, error) {
	dir := os.Getenv("HERALD_PROVIDER_SPECS")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "..", "shared", "provider-specs")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("provider spec %s not found at %s: %w (%s)", name, p, err, setupHint)
	}
	return p, nil
}

// PrismPath returns node_modules/.bin/prism under the repo root.
func PrismPath() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "node_modules", ".bin", "prism")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("prism not found at %s: %w (%s)", p, err, setupHint)
	}
	return p, nil
}

// Prism is a running `prism mock --errors` for one spec: it answers a request that
// violates the spec with 4xx and lists the violations in an sl-violations header.
type Prism struct {
	// URL is the mock's base URL; point the SDK here.
	URL  string
	Spec string
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	log bytes.Buffer
}

// StartPrism starts Prism on a free loopback port for the named spec (see
// SpecPath) and waits until it answers. Close it when done.
func StartPrism(specName string) (*Prism, error) {
	spec, err := SpecPath(specName)
	if err != nil {
		return nil, err
	}
	bin, err := PrismPath()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		p, err := startPrism(bin, spec)
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startPrism(bin, spec string) (*Prism, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Prism{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Spec: spec, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "mock", "-h", "127.0.0.1", "-p", fmt.Sprint(port), "--errors", spec)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close ends prism's node children too
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start prism: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return nil, fmt.Errorf("prism exited before answering:\n%s", p.Log())
		default:
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return p, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.Close()
	return nil, fmt.Errorf("prism did not answer within 60s:\n%s", p.Log())
}

// Log returns what Prism printed so far (its validation messages).
func (p *Prism) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Close stops Prism.
func (p *Prism) Close() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Exchange is one request and response seen by a Capture transport.
type Exchange struct {
	Method, URL string
	ReqHeader   http.Header
	ReqBody     []byte
	Status      int
	RespHeader  http.Header
	RespBody    []byte
}

// Violations returns Prism's sl-violations header, or "".
func (e Exchange) Violations() string { return e.RespHeader.Get("sl-violations") }

// Capture is an http.RoundTripper that records every exchange; give the SDK an
// http.Client using it to see exactly what went over the wire.
type Capture struct {
	Base http.RoundTripper
	mu   sync.Mutex
	ex   []Exchange
}

// Client returns an *http.Client that sends through c.
func (c *Capture) Client() *http.Client { return &http.Client{Transport: c, Timeout: 30 * time.Second} }

// RoundTrip implements http.RoundTripper.
func (c *Capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	base := c.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	c.mu.Lock()
	c.ex = append(c.ex, Exchange{Method: r.Method, URL: r.URL.String(), ReqHeader: r.Header.Clone(), ReqBody: body,
		Status: resp.StatusCode, RespHeader: resp.Header.Clone(), RespBody: rb})
	c.mu.Unlock()
	return resp, nil
}

// Exchanges returns the recorded exchanges.
func (c *Capture) Exchanges() []Exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Exchange(nil), c.ex...)
}

// CheckConforms returns an error unless every exchange got a non-4xx answer without
// sl-violations: the contract-test assertion against a Prism mock.
func (c *Capture) CheckConforms() error {
	ex := c.Exchanges()
	if len(ex) == 0 {
		return errors.New("no request reached the mock")
	}
	var problems []string
	for _, e := range ex {
		if e.Status >= 400 || e.Violations() != "" {
			problems = append(problems, fmt.Sprintf("%s %s → %d\n  sl-violations: %s\n  response: %s\n  request body: %s",
				e.Method, e.URL, e.Status, e.Violations(), e.RespBody, e.ReqBody))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("requests violate the provider's OpenAPI spec:\n%s", strings.Join(problems, "\n"))
	}
	return nil
}

// SharedPrism starts one Prism per test package, on first use, for a spec. A
// missing spec or Prism fails the test that asked for it: never a skip.
type SharedPrism struct {
	Spec string
	once sync.Once
	p    *Prism
	err  error
}

// Get returns the running mock, starting it on first use.
func (s *SharedPrism) Get(t testing.TB) *Prism {
	t.Helper()
	s.once.Do(func() { s.p, s.err = StartPrism(s.Spec) })
	if s.err != nil {
		t.Fatalf("contract test needs Prism and the spec %s: %v", s.Spec, s.err)
	}
	return s.p
}

// Close stops the mock if it was started (call it from TestMain).
func (s *SharedPrism) Close() {
	if s.p != nil {
		s.p.Close()
	}
}
