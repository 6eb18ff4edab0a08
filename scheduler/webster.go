package scheduler

import (
	"cmp"
	"container/heap"
	"math"
	"math/bits"

	"k8s.io/apimachinery/pkg/types"
)

// Webster apportions seats among parties with the Webster/Sainte-Laguë method
// (divisors 1,3,5,...; equivalently rounding at .5). Deterministic: a tie for a
// seat (equal quotients) goes to the party with fewer seats so far, then by
// name: to the lower one, or to the higher one when the 32-bit FNV-1a hash
// of uid is odd; an empty uid ties to the lower name. That is Karmada's
// rule for the resource template's UID, which Schedule passes
// (Input.TemplateUID).
//
// Weights <= 0 get nothing. Returns seats per party name (every party present,
// possibly 0). If every weight is <= 0 it returns all zeros.
//
// Quotients are compared exactly (128-bit products), so any int64 weight
// works, and the cost is O(n log n) in the number of parties whatever the
// number of seats. (Karmada compares them in float64, which agrees unless a
// weight times a divisor reaches about 2^52.)
func Webster(seats int32, weights map[string]int64, uid types.UID) map[string]int32 {
	parties := make([]party, 0, len(weights))
	for name, w := range weights {
		parties = append(parties, party{name: name, weight: w})
	}
	apportion(int64(seats), parties, tiesFor(uid))
	out := make(map[string]int32, len(parties))
	for _, p := range parties {
		out[p.name] = int32(p.seats)
	}
	return out
}

// party is one claimant of seats; apportion fills in seats.
type party struct {
	name   string
	weight int64
	seats  int64
}

// ties is the order in which Webster gives a seat to parties whose
// quotients and seats are equal: by name, lower or higher first.
type ties bool

const (
	lowerNameFirst  ties = false
	higherNameFirst ties = true
)

// tiesFor is Karmada's tie order for a resource template's UID: the
// higher name first when the 32-bit FNV-1a hash of the UID's bytes is odd,
// the lower name first when it is even or the UID is empty (whose hash,
// the offset basis, would be odd).
func tiesFor(uid types.UID) ties {
	if uid == "" {
		return lowerNameFirst
	}
	h := uint32(2166136261) // FNV-1a: the 32-bit offset basis and prime
	for i := range len(uid) {
		h ^= uint32(uid[i])
		h *= 16777619
	}
	if h&1 == 1 {
		return higherNameFirst
	}
	return lowerNameFirst
}

// apportion sets the seats of parties, which must have distinct names. The
// result is that of handing out seats one at a time to the party with the
// highest quotient weight/(2·seats+1), ties broken by fewer seats, then by
// name in the order t; it just gets there faster.
func apportion(seats int64, parties []party, t ties) {
	q := &seatQueue{parties: parties, ties: t}
	for i := range parties {
		parties[i].seats = 0
		if parties[i].weight > 0 {
			q.idx = append(q.idx, i)
		}
	}
	if seats <= 0 || len(q.idx) == 0 {
		return
	}
	q.handOut(seats - q.jumpStart(seats))
}

// seatQueue orders the parties with a positive weight by who gets the next
// seat. Parties never leave it: a seat only lowers their quotient.
type seatQueue struct {
	parties []party
	idx     []int // indexes into parties, a heap
	ties    ties
}

// handOut gives seats one at a time.
func (q *seatQueue) handOut(seats int64) {
	heap.Init(q)
	for ; seats > 0; seats-- {
		q.parties[q.idx[0]].seats++
		heap.Fix(q, 0)
	}
}

// jumpStart gives every party, at once, the seats whose quotient is above a
// common threshold T, and returns how many it gave. One at a time, every
// such seat would be handed out before any seat at or below T, so the state
// reached is one the one-at-a-time method passes through, whichever way
// ties go (they only order seats of equal quotient), provided it does not
// exceed seats.
//
// T is wmax/m, with wmax the largest weight: seat k (counting from 1) of a
// party of weight w is above T iff (2k−1)·wmax < w·m, exact in 128 bits.
// Choosing m ≤ wmax·(2·seats−n)/W (W the total weight, n the parties) keeps
// the total at most seats and leaves at most about 1.5·n seats to hand out
// one at a time. m is estimated in floating point with a margin; the total
// is checked, so a bad estimate could only cost time, never correctness.
func (q *seatQueue) jumpStart(seats int64) int64 {
	n := int64(len(q.idx))
	if 2*seats <= 3*n {
		return 0 // few seats per party: one at a time is cheap enough
	}
	var wmax int64
	var total float64
	for _, i := range q.idx {
		w := q.parties[i].weight
		wmax = max(wmax, w)
		total += float64(w)
	}
	m := math.Floor(float64(wmax) * float64(2*seats-n) / total * (1 - 1e-9))
	if m < 1 {
		return 0
	}
	var given int64
	for _, i := range q.idx {
		p := &q.parties[i]
		p.seats = seatsAbove(p.weight, uint64(m), wmax)
		given += p.seats
	}
	if given > seats {
		for _, i := range q.idx {
			q.parties[i].seats = 0
		}
		return 0
	}
	return given
}

// seatsAbove counts the odd divisors d ≥ 1 with w/d > wmax/m, that is
// d·wmax < w·m, for 0 < w ≤ wmax and m ≥ 1.
func seatsAbove(w int64, m uint64, wmax int64) int64 {
	hi, lo := bits.Mul64(uint64(w), m)
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	// The largest d with d·wmax ≤ w·m−1. The quotient is below m, so it
	// fits in 64 bits and Div64 cannot panic.
	d, _ := bits.Div64(hi, lo, uint64(wmax))
	return int64((d + 1) / 2)
}

func (q *seatQueue) Len() int { return len(q.idx) }

func (q *seatQueue) Less(a, b int) bool {
	return nextSeatFirst(&q.parties[q.idx[a]], &q.parties[q.idx[b]], q.ties)
}

func (q *seatQueue) Swap(a, b int) { q.idx[a], q.idx[b] = q.idx[b], q.idx[a] }

// Push and Pop complete heap.Interface; the queue never grows or shrinks.
func (q *seatQueue) Push(x any) { q.idx = append(q.idx, x.(int)) }

func (q *seatQueue) Pop() any {
	last := q.idx[len(q.idx)-1]
	q.idx = q.idx[:len(q.idx)-1]
	return last
}

// nextSeatFirst reports whether a gets the next seat before b: higher
// quotient, then fewer seats, then name in the order t.
func nextSeatFirst(a, b *party, t ties) bool {
	if c := compareQuotients(a, b); c != 0 {
		return c > 0
	}
	if a.seats != b.seats {
		return a.seats < b.seats
	}
	if t == higherNameFirst {
		return a.name > b.name
	}
	return a.name < b.name
}

// compareQuotients compares a.weight/(2·a.seats+1) with
// b.weight/(2·b.seats+1) by cross-multiplying in 128 bits: weights up to
// 2^63 times divisors up to 2^33 cannot overflow.
func compareQuotients(a, b *party) int {
	ahi, alo := bits.Mul64(uint64(a.weight), uint64(2*b.seats+1))
	bhi, blo := bits.Mul64(uint64(b.weight), uint64(2*a.seats+1))
	return cmp.Or(cmp.Compare(ahi, bhi), cmp.Compare(alo, blo))
}
