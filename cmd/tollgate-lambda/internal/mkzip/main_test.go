package main

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	content := bytes.Repeat([]byte("\x7fELF binary "), 1000)
	if err := os.WriteFile(bin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "out.zip")
	if err := write(archive, bin); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
		t.Fatalf("archive holds %v, want bootstrap alone", zr.File)
	}
	if m := zr.File[0].Mode(); m.Perm() != 0o755 || !m.IsRegular() {
		t.Errorf("bootstrap mode %v, want -rwxr-xr-x", m)
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("content differs (%v)", err)
	}

	// The same file gives the same archive, replaced in place.
	if err := write(archive, bin); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(archive); !bytes.Equal(again, first) {
		t.Error("writing the same file again gave another archive")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
	if err := write(archive, filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}
