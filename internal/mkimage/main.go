// Command mkimage writes the tollgate container image as an OCI image
// layout archive, without a container daemon or a registry: one layer per
// platform holding the static binary, the CA certificates and a non-root
// user, on nothing (FROM scratch). `docker load` (Docker 25 or later) and
// `podman load` read the archive.
//
//	go run ./internal/mkimage -o dist/tollgate-oci.tar -version v1.2.3 \
//	    -ca /etc/ssl/certs/ca-certificates.crt \
//	    linux/amd64=dist/linux-amd64/tollgate linux/arm64=dist/linux-arm64/tollgate
//
// The archive is reproducible: files, configs and the archive itself carry
// one fixed time (-time, default the Unix epoch), so the same binaries give
// the same image digest.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.out, "o", "dist/tollgate-oci.tar", "the archive to write")
	flag.StringVar(&o.version, "version", "dev", "the image's version (its tag and label)")
	flag.StringVar(&o.revision, "revision", "", "the VCS revision, for the image's label")
	flag.StringVar(&o.ca, "ca", "/etc/ssl/certs/ca-certificates.crt", "the CA certificates bundle to ship")
	flag.StringVar(&o.name, "name", "tollgate", "the image's repository name")
	created := flag.Int64("time", 0, "the time of every file and of the image, Unix seconds")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mkimage [flags] OS/ARCH=BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	o.created = time.Unix(*created, 0).UTC()
	var err error
	if o.binaries, err = parseBinaries(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

// parseBinaries reads OS/ARCH=FILE arguments.
func parseBinaries(args []string) ([]platformBinary, error) {
	if len(args) == 0 {
		return nil, errors.New("no binary given")
	}
	var out []platformBinary
	for _, a := range args {
		plat, file, ok := strings.Cut(a, "=")
		osName, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || osName == "" || arch == "" || file == "" {
			return nil, fmt.Errorf("%q: want OS/ARCH=FILE", a)
		}
		out = append(out, platformBinary{os: osName, arch: arch, file: file})
	}
	return out, nil
}
