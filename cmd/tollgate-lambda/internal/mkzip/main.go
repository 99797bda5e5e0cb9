// Command mkzip writes a Lambda deployment package: a zip archive holding one
// executable file, under its base name, with a fixed modification time so
// that the same binary always gives the same archive. It is `zip -j` in Go,
// so that `make lambda` needs nothing but the Go toolchain.
//
//	go run ./cmd/tollgate-lambda/internal/mkzip ARCHIVE FILE
package main

import (
	"archive/zip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: mkzip ARCHIVE FILE")
		os.Exit(2)
	}
	if err := write(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "mkzip:", err)
		os.Exit(1)
	}
}

// write puts file into a new archive at path (replacing any), as an
// executable (mode 0755: Lambda runs the bootstrap file of the package).
func write(path, file string) (err error) {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mkzip-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw := zip.NewWriter(tmp)
	h := &zip.FileHeader{Name: filepath.Base(file), Method: zip.Deflate,
		Modified: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	if _, err = io.Copy(w, in); err != nil {
		return err
	}
	if err = zw.Close(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
