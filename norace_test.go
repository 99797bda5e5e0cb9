//go:build !race

package tollgate_test

const raceEnabled = false
