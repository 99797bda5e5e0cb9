package deploy

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/cloudformation/tollgate.json")

// TestTemplateGolden keeps deploy/cloudformation/tollgate.json, the
// template for users without the CLI, equal to Template of the defaults.
// After changing base.json or the policies: go test ./deploy -run Golden -update
func TestTemplateGolden(t *testing.T) {
	got, err := Template(TemplateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const path = "cloudformation/tollgate.json"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale: go test ./deploy -run Golden -update", path)
	}
}
