package tollgate

import (
	"testing"

	"github.com/tollgate-rl/tollgate/bucket"
	"github.com/tollgate-rl/tollgate/store"
)

// TestNearOfAgreesWithUse: nearOf, which divides only above half the
// capacity, answers as useOf >= NearLimit does, at the edges of both
// thresholds and of the balance's range.
func TestNearOfAgreesWithUse(t *testing.T) {
	capacities := []int64{0, 1, 2, 3, 5, 7, 10, 1000, 10_000, 99_999, bucket.MaxTokens}
	for _, capacity := range capacities {
		var tokens []int64
		for _, v := range []int64{0, 1, capacity / 5, capacity / 2, capacity / 10 * 8, capacity / 10 * 2, capacity, -capacity, -bucket.MaxTokens / 2} {
			tokens = append(tokens, v-1, v, v+1)
		}
		for _, tok := range tokens {
			for _, amount := range []int64{0, 1, capacity / 3} {
				for _, c := range []struct{ granted, exceeded bool }{{true, false}, {false, true}, {false, false}} {
					lr := &store.LimitRequest{Params: bucket.Params{Capacity: capacity}, Amount: amount, Observed: bucket.State{Tokens: tok}}
					if got, want := nearOf(lr, c.granted, c.exceeded), useOf(lr, c.granted, c.exceeded) >= NearLimit; got != want {
						t.Errorf("capacity %d tokens %d amount %d %+v: nearOf %v, useOf says %v", capacity, tok, amount, c, got, want)
					}
				}
			}
		}
	}
}
