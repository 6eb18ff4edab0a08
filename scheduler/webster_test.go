package scheduler

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestWebster(t *testing.T) {
	tests := []struct {
		name    string
		seats   int32
		weights map[string]int64
		want    map[string]int32
	}{
		{"1:2 with 3", 3, map[string]int64{"a": 1, "b": 2}, map[string]int32{"a": 1, "b": 2}},
		{"1:2 with 9", 9, map[string]int64{"a": 1, "b": 2}, map[string]int32{"a": 3, "b": 6}},
		// Quotients b 2, a 1, b 2/3, then b 2/5 beats a 1/3.
		{"1:2 with 4", 4, map[string]int64{"a": 1, "b": 2}, map[string]int32{"a": 1, "b": 3}},
		// Quotients A 53000 17667 10600 7571, B 24000 8000, C 23000 7667:
		// the 7 highest give A 3, B 2, C 2 (D'Hondt would give 4/2/1).
		{"textbook 7 seats", 7, map[string]int64{"A": 53000, "B": 24000, "C": 23000}, map[string]int32{"A": 3, "B": 2, "C": 2}},
		// The 10 highest quotients: A 100000 33333 20000 14286, B 80000
		// 26667 16000 11429, C 30000, D 20000; the 11th is A's 11111.
		// (Not 4/3/2/1: C's second quotient is only 10000.)
		{"textbook 10 seats", 10, map[string]int64{"A": 100000, "B": 80000, "C": 30000, "D": 20000}, map[string]int32{"A": 4, "B": 4, "C": 1, "D": 1}},
		// Quotas 4.375 and 0.625: rounding at one half gives b a seat
		// (D'Hondt would give all 5 to a).
		{"rounds at one half", 5, map[string]int64{"a": 875, "b": 125}, map[string]int32{"a": 4, "b": 1}},
		{"equal weights tie to lower names", 2, map[string]int64{"c": 5, "b": 5, "a": 5}, map[string]int32{"a": 1, "b": 1, "c": 0}},
		// After a's first seat, a's 3/3 ties with z's 1/1: fewer seats wins
		// over the lower name.
		{"tie to fewer seats before name", 2, map[string]int64{"a": 3, "z": 1}, map[string]int32{"a": 1, "z": 1}},
		{"zero and negative weights get nothing", 4, map[string]int64{"a": 0, "b": -3, "c": 1}, map[string]int32{"a": 0, "b": 0, "c": 4}},
		{"all zero", 5, map[string]int64{"a": 0, "b": 0}, map[string]int32{"a": 0, "b": 0}},
		{"zero seats", 0, map[string]int64{"a": 1, "b": 2}, map[string]int32{"a": 0, "b": 0}},
		{"negative seats", -2, map[string]int64{"a": 1}, map[string]int32{"a": 0}},
		{"no parties", 3, map[string]int64{}, map[string]int32{}},
		{"max weights", 3, map[string]int64{"a": math.MaxInt64, "b": math.MaxInt64 - 1}, map[string]int32{"a": 2, "b": 1}},
		{"max seats", math.MaxInt32, map[string]int64{"a": 1, "b": 1}, map[string]int32{"a": 1 << 30, "b": 1<<30 - 1}},
		{"max seats and weights", math.MaxInt32, map[string]int64{"a": math.MaxInt64, "b": 1, "c": math.MaxInt64 / 2},
			map[string]int32{"a": 1431655765, "b": 0, "c": 715827882}},
		// Karmada's dispenser cases without a previous assignment
		// (pkg/util/helper/binding_test.go), with its UIDs: none, or
		// one whose hash is even, ties to the lower name; one whose hash
		// is odd, to the higher.
		{"Karmada 170:110:60 with 5", 5, map[string]int64{"A": 170, "B": 110, "C": 60}, map[string]int32{"A": 2, "B": 2, "C": 1}},
		{"Karmada 170:110:60 with 6", 6, map[string]int64{"A": 170, "B": 110, "C": 60}, map[string]int32{"A": 3, "B": 2, "C": 1}},
		{"Karmada 2:1 with 1", 1, map[string]int64{"A": 2, "B": 1}, map[string]int32{"A": 1, "B": 0}},
		{"Karmada 2:1 with 2", 2, map[string]int64{"A": 2, "B": 1}, map[string]int32{"A": 1, "B": 1}},
		{"Karmada 2:1 with 3", 3, map[string]int64{"A": 2, "B": 1}, map[string]int32{"A": 2, "B": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Webster(tt.seats, tt.weights, "")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Webster(%d, %v) (-want +got):\n%s", tt.seats, tt.weights, diff)
			}
		})
	}
}

// Karmada's test UIDs (pkg/util/helper/binding_test.go): the 32-bit FNV-1a
// hash of evenUID is even, of oddUID odd.
const (
	evenUID types.UID = "4858ca61-3ff8-4095-8267-f3d059d8074c"
	oddUID  types.UID = "d43fdeeb-d750-4e2b-bee3-64eb94534f4c"
)

// TestWebsterTies checks which way exact ties go for a template UID, with
// Karmada's cases ("brand new assign 5 replicas" with an odd and an even
// UID) and more.
func TestWebsterTies(t *testing.T) {
	tests := []struct {
		name    string
		seats   int32
		weights map[string]int64
		uid     types.UID
		want    map[string]int32
	}{
		{"Karmada 1:1 with 5, no UID", 5, map[string]int64{"A": 1, "B": 1}, "", map[string]int32{"A": 3, "B": 2}},
		{"Karmada 1:1 with 5, odd UID", 5, map[string]int64{"A": 1, "B": 1}, oddUID, map[string]int32{"A": 2, "B": 3}},
		{"Karmada 1:1 with 5, even UID", 5, map[string]int64{"A": 1, "B": 1}, evenUID, map[string]int32{"A": 3, "B": 2}},
		{"equal weights, odd UID: higher names", 2, map[string]int64{"c": 5, "b": 5, "a": 5}, oddUID, map[string]int32{"a": 0, "b": 1, "c": 1}},
		{"equal weights, even UID: lower names", 2, map[string]int64{"c": 5, "b": 5, "a": 5}, evenUID, map[string]int32{"a": 1, "b": 1, "c": 0}},
		// a's 3/3 ties with z's 1/1: fewer seats wins whatever the UID.
		{"fewer seats before name, odd UID", 2, map[string]int64{"a": 3, "z": 1}, oddUID, map[string]int32{"a": 1, "z": 1}},
		{"fewer seats before name, even UID", 2, map[string]int64{"a": 3, "z": 1}, evenUID, map[string]int32{"a": 1, "z": 1}},
		// Ties only: unequal quotients go by quotient whatever the UID.
		{"no tie, odd UID", 3, map[string]int64{"a": 2, "b": 1}, oddUID, map[string]int32{"a": 2, "b": 1}},
		{"max seats, odd UID", math.MaxInt32, map[string]int64{"a": 1, "b": 1}, oddUID, map[string]int32{"a": 1<<30 - 1, "b": 1 << 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Webster(tt.seats, tt.weights, tt.uid)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Webster(%d, %v, %q) (-want +got):\n%s", tt.seats, tt.weights, tt.uid, diff)
			}
		})
	}
}

// TestTiesFor checks the tie order against hash/fnv, on Karmada's UIDs,
// UIDs as the API server makes them and odd strings.
func TestTiesFor(t *testing.T) {
	if tiesFor("") != lowerNameFirst || tiesFor(evenUID) != lowerNameFirst || tiesFor(oddUID) != higherNameFirst {
		t.Fatalf("tiesFor: empty %v, even %v, odd %v; want lower, lower, higher names first", tiesFor(""), tiesFor(evenUID), tiesFor(oddUID))
	}
	r := rand.New(rand.NewPCG(9, 10))
	uids := []types.UID{"a", "b", "\x00", "\xff\xfe", "member1"}
	for range 500 {
		uids = append(uids, randomUID(r))
	}
	for _, uid := range uids {
		if got, want := tiesFor(uid), ties(karmadaHigherFirst(uid)); got != want {
			t.Errorf("tiesFor(%q) = %v, want %v", uid, got, want)
		}
	}
}

// karmadaHigherFirst is Karmada's choice (tieBreakerByUID in
// pkg/util/helper/binding.go) with the standard library's FNV-1a: the
// higher name first when the hash of a non-empty UID is odd.
func karmadaHigherFirst(uid types.UID) bool {
	if len(uid) == 0 {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(uid))
	return h.Sum32()&1 == 1
}

// randomUID is a version 4 UUID as the API server makes them, or now and
// then an empty one.
func randomUID(r *rand.Rand) types.UID {
	if r.IntN(8) == 0 {
		return ""
	}
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff,
		0x8000|r.Uint32()&0x3fff, r.Uint64()&0xffffffffffff))
}

// TestWebsterMatchesOneAtATime checks the fast path (jump start, 128-bit
// comparisons) against the definition: one seat at a time to the highest
// quotient, compared with math/big. Small weights make ties frequent.
func TestWebsterMatchesOneAtATime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		parties := 1 + r.IntN(8)
		weights := map[string]int64{}
		maxWeight := []int64{3, 10, 1000, 1 << 62}[r.IntN(4)]
		for p := range parties {
			weights[fmt.Sprintf("p%d", p)] = r.Int64N(maxWeight+2) - 1 // some 0 and -1
		}
		seats := int32(r.IntN(200))
		uid := pick(r, "", evenUID, oddUID, randomUID(r))
		want := websterOneAtATime(seats, weights, karmadaHigherFirst(uid))
		if got := Webster(seats, weights, uid); !maps.Equal(got, want) {
			t.Fatalf("case %d: Webster(%d, %v, %q) = %v, want %v", i, seats, weights, uid, got, want)
		}
	}
}

// TestWebsterJumpStart checks the jump start against handing out every
// seat through the queue, on sizes where the reference would be too slow.
func TestWebsterJumpStart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		n := 1 + r.IntN(300)
		seats := int64(r.IntN(20000))
		weight := []int64{2, 100, 1e12, math.MaxInt64}[i%4]
		fast := randomParties(r, n, weight)
		slow := slices.Clone(fast)
		order := ties(i%3 == 0)
		apportion(seats, fast, order)
		q := &seatQueue{parties: slow, ties: order}
		for j := range slow {
			if slow[j].weight > 0 {
				q.idx = append(q.idx, j)
			}
		}
		if len(q.idx) > 0 {
			q.handOut(seats)
		}
		if diff := cmp.Diff(slow, fast, cmp.AllowUnexported(party{})); diff != "" {
			t.Fatalf("case %d (%d seats, %d parties): jump start differs (-one at a time +fast):\n%s", i, seats, n, diff)
		}
	}
}

func TestWebsterLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	weights := map[string]int64{}
	for p := range 1000 {
		weights[fmt.Sprintf("p%04d", p)] = 1 + r.Int64N(1e12)
	}
	for _, seats := range []int32{1e5, 1e6, math.MaxInt32} {
		start := time.Now()
		got := Webster(seats, weights, oddUID)
		elapsed := time.Since(start)
		var sum int64
		for _, s := range got {
			sum += int64(s)
		}
		if sum != int64(seats) || len(got) != len(weights) {
			t.Errorf("Webster(%d, 1000 parties): %d parties, %d seats in all", seats, len(got), sum)
		}
		// Generous: it takes well under a millisecond, but -race and
		// loaded CI machines are slow. One at a time would take seconds.
		if elapsed > 2*time.Second {
			t.Errorf("Webster(%d, 1000 parties) took %v", seats, elapsed)
		}
	}
}

func randomParties(r *rand.Rand, n int, maxWeight int64) []party {
	parties := make([]party, n)
	for i := range parties {
		parties[i] = party{name: fmt.Sprintf("p%03d", i), weight: r.Int64N(maxWeight)}
	}
	return parties
}

// websterOneAtATime is the definition, slow and obvious; full ties go to
// the higher name when higherFirst is set.
func websterOneAtATime(seats int32, weights map[string]int64, higherFirst bool) map[string]int32 {
	got := map[string]int32{}
	for name := range weights {
		got[name] = 0
	}
	names := slices.Sorted(maps.Keys(weights))
	if higherFirst {
		slices.Reverse(names)
	}
	for range max(seats, 0) {
		best := ""
		for _, name := range names {
			if weights[name] <= 0 {
				continue
			}
			if best == "" {
				best = name
				continue
			}
			// name/(2s+1) vs best/(2s'+1), exactly.
			c := new(big.Int).Mul(big.NewInt(weights[name]), big.NewInt(2*int64(got[best])+1)).Cmp(
				new(big.Int).Mul(big.NewInt(weights[best]), big.NewInt(2*int64(got[name])+1)))
			if c > 0 || (c == 0 && got[name] < got[best]) {
				best = name // on a full tie the earlier name stays
			}
		}
		if best == "" {
			break
		}
		got[best]++
	}
	return got
}

func ExampleWebster() {
	fmt.Println(Webster(4, map[string]int64{"member-a": 1, "member-b": 2}, ""))
	fmt.Println(Webster(7, map[string]int64{"A": 53000, "B": 24000, "C": 23000}, ""))
	// An exact tie: the UID decides, as in Karmada.
	fmt.Println(Webster(5, map[string]int64{"member-a": 1, "member-b": 1}, "4858ca61-3ff8-4095-8267-f3d059d8074c"))
	fmt.Println(Webster(5, map[string]int64{"member-a": 1, "member-b": 1}, "d43fdeeb-d750-4e2b-bee3-64eb94534f4c"))
	// Output:
	// map[member-a:1 member-b:3]
	// map[A:3 B:2 C:2]
	// map[member-a:3 member-b:2]
	// map[member-a:2 member-b:3]
}

func BenchmarkWebster(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	weights := map[string]int64{}
	for p := range 1000 {
		weights[fmt.Sprintf("p%04d", p)] = 1 + r.Int64N(1e12)
	}
	for _, seats := range []int32{1000, 1e6} {
		b.Run(fmt.Sprintf("seats=%d", seats), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Webster(seats, weights, "")
			}
		})
	}
}
