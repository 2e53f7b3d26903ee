package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

var bannerKey = regexp.MustCompile(`API key:\s+(hk_\S+)\s+\(([^)]*)\)`)

// devEnv is the environment of a herald process on the test services, with no
// HERALD_ variable of the caller's leaking in.
func devEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"HERALD_DATABASE_URL="+testenv.DatabaseURL(t),
		"HERALD_TEMPORAL_ADDRESS="+testenv.TemporalAddress(t),
		"HERALD_HTTP_ADDR=127.0.0.1:0",
		"HERALD_TASK_QUEUE="+testenv.UniqueName(t, "tq"))
}

// runDevOnce starts `herald dev` in dir, waits for its banner, stops it with
// SIGTERM and returns the API key it printed and the note next to it.
func runDevOnce(t *testing.T, bin, dir string, env []string) (key, note string) {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(bin, "dev")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(out.String(), "Try it:") {
		select {
		case err := <-done:
			t.Fatalf("herald dev exited early (%v):\n%s", err, out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("herald dev printed no banner:\n%s", out)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("herald dev after SIGTERM: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("herald dev did not stop on SIGTERM:\n%s", out)
	}
	m := bannerKey.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no API key in the banner:\n%s", out)
	}
	return m[1], m[2]
}

func runHerald(t *testing.T, bin, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("herald %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestDevRestartReusesTheKey: `herald dev` keeps its key in .herald/dev-api-key
// (mode 0600) and prints the same one on the next start instead of minting another;
// once that key is revoked (herald key revoke) the next start mints a new one.
func TestDevRestartReusesTheKey(t *testing.T) {
	t.Parallel()
	bin := buildHerald(t)
	dir, env := t.TempDir(), devEnv(t)
	st := store.New(testenv.Pool(t))
	ctx := context.Background()

	first, note := runDevOnce(t, bin, dir, env)
	if !strings.HasPrefix(note, "new") {
		t.Errorf("first start: note %q", note)
	}
	file := filepath.Join(dir, devKeyFile)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", devKeyFile, fi.Mode().Perm())
	}
	if raw, _ := os.ReadFile(file); strings.TrimSpace(string(raw)) != first {
		t.Fatalf("%s holds %q, want the printed key", devKeyFile, raw)
	}
	demo, err := st.TenantByAPIKey(ctx, first)
	if err != nil || demo.Name != demoTenant {
		t.Fatalf("the printed key: %v %v", demo, err)
	}
	before, err := st.ListAPIKeys(ctx, demo.ID)
	if err != nil {
		t.Fatal(err)
	}

	second, note := runDevOnce(t, bin, dir, env)
	if second != first || !strings.HasPrefix(note, "reused") {
		t.Fatalf("restart printed %s (%s), want the same key as before", second, note)
	}
	if after, _ := st.ListAPIKeys(ctx, demo.ID); len(after) != len(before) {
		t.Fatalf("a restart minted a key: %d keys, then %d", len(before), len(after))
	}

	// Revoke it from the command line, as the banner suggests.
	list := runHerald(t, bin, dir, env, "key", "list", "--tenant", demo.ID)
	var id string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == first[:9] {
			id = f[0]
		}
	}
	if id == "" || strings.Contains(list, first) {
		t.Fatalf("herald key list (key %s…):\n%s", first[:9], list)
	}
	runHerald(t, bin, dir, env, "key", "revoke", "--tenant", demo.ID, "--force", id)
	if _, err := st.TenantByAPIKey(ctx, first); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("revoked key still resolves: %v", err)
	}

	third, note := runDevOnce(t, bin, dir, env)
	if third == first || !strings.Contains(note, "revoked") {
		t.Fatalf("after the revoke: %s (%s), want a new key", third, note)
	}
	if raw, _ := os.ReadFile(file); strings.TrimSpace(string(raw)) != third {
		t.Fatalf("%s was not replaced", devKeyFile)
	}
	if got, err := st.TenantByAPIKey(ctx, third); err != nil || got.ID != demo.ID {
		t.Fatalf("new dev key: %v %v", got, err)
	}
}
