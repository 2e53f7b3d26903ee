package providertest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Module is Herald's module path; RepoRoot looks for its go.mod.
const Module = "github.com/herald-notify/herald"

// Spec file names in providers/testdata (vendored, with their licences; see the
// README.md there).
const (
	SpecSendGridMail = "sendgrid_mail_v3.json"
	SpecTwilioAPI    = "twilio_api_v2010.json"
)

// SpecDir is where the provider specs live, relative to the repository root.
const SpecDir = "providers/testdata"

// RepoRoot returns the repository root: the nearest parent of the working directory
// whose go.mod declares Herald's module. (go test runs a package's tests in its
// directory, so this works wherever the repository was cloned.)
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

// SpecPath returns the absolute path of a provider OpenAPI spec in
// providers/testdata. A missing file is an error that says where it was looked for.
func SpecPath(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, filepath.FromSlash(SpecDir), name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("provider spec %s not found at %s: %w (the specs are vendored in %s; see its README.md)",
			name, p, err, SpecDir)
	}
	return p, nil
}

// contractSpec is one provider spec, loaded, validated and routed.
type contractSpec struct {
	name   string
	path   string
	doc    *openapi3.T
	router routers.Router
	// loadTime is how long loading took (the Twilio document is ~1.9 MB and takes
	// about half a second, hence the cache).
	loadTime time.Duration
}

type specEntry struct {
	once sync.Once
	spec *contractSpec
	err  error
}

// specs caches every spec loaded by this process: one sync.Once per file, so each
// document is parsed once however many tests and servers use it. The loaded
// document and router are only read afterwards (kin-openapi's validation does not
// mutate them), so servers share them across goroutines.
var specs sync.Map // name → *specEntry

// loadSpec returns the named spec, loading it on first use.
func loadSpec(name string) (*contractSpec, error) {
	e, _ := specs.LoadOrStore(name, &specEntry{})
	entry := e.(*specEntry)
	entry.once.Do(func() { entry.spec, entry.err = readSpec(name) })
	return entry.spec, entry.err
}

func readSpec(name string) (*contractSpec, error) {
	start := time.Now()
	path, err := SpecPath(name)
	if err != nil {
		return nil, err
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	// Examples are not validated: they are documentation, not the contract, and
	// twilio_api_v2010.json has at least one that does not match its own schema
	// (GET .../DependentPhoneNumbers.json, trunk_sid "AP…" against ^TK…), in an
	// operation Herald never calls. Prism does not check examples at startup either.
	if err := doc.Validate(loader.Context, openapi3.DisableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", path, err)
	}
	// Match by method and path only: the documents' servers (and Twilio's per-path
	// servers) name the providers' real hosts, never the test server's port; with no
	// servers gorillamux matches any scheme and host. This document instance is
	// private to the cache, so clearing them is safe.
	doc.Servers = nil
	for _, item := range doc.Paths.Map() {
		item.Servers = nil
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", path, err)
	}
	return &contractSpec{name: name, path: path, doc: doc, router: router, loadTime: time.Since(start)}, nil
}
