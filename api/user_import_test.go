package api

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestImportValidCacheDoesNotPinLines: the locale and time zone caches keep
// copies of what they hold, not slices of the lines they came from (the fast
// decoder's strings are slices of a copy of the whole line): 4096 lines of
// 60 KiB, each with a new locale and zone, leave no more than a few MiB live
// (they pinned 256 MiB).
func TestImportValidCacheDoesNotPinLines(t *testing.T) {
	ir := &importReader{ndjson: true, maxTokens: 10}
	pad := strings.Repeat(" ", 60<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range maxValidCache {
		line := fmt.Sprintf(`{"user_id":"u%d",%s"locale":"en-x-%06d","topics":["t%d"]}`, i, pad, i, i)
		if _, err := ir.parseJSON([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(ir.locales) != maxValidCache {
		t.Fatalf("%d locales cached, want %d", len(ir.locales), maxValidCache)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
		t.Fatalf("the live heap grew by %d MiB after %d lines", grew>>20, maxValidCache)
	}
	runtime.KeepAlive(ir)
}

// TestImportFastTopicsReleaseLines: the topics' array the fast decoder reuses
// holds nothing of the line before (its elements would keep that line alive).
func TestImportFastTopicsReleaseLines(t *testing.T) {
	var f importFast
	if !decodeFast([]byte(`{"user_id":"u1","topics":["a","b","c"]}`), &f) {
		t.Fatal("not decoded")
	}
	if !decodeFast([]byte(`{"user_id":"u2","topics":["d"]}`), &f) {
		t.Fatal("not decoded")
	}
	for i, s := range f.topics[len(f.topics):cap(f.topics)] {
		if s != "" {
			t.Fatalf("topics[%d] beyond the line's still holds %q", len(f.topics)+i, s)
		}
	}
}
