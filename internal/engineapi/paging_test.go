package engineapi

import (
	"errors"
	"slices"
	"testing"
)

// A listing of 10 items answered 3 at a time: Gather asks from where the
// last page ended, for what is still wanted, and stops at the limit, at the
// end, or at an error (keeping what it had).
func TestGather(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	var asked [][2]int
	page := func(offset, limit int) ([]int, bool, error) {
		asked = append(asked, [2]int{offset, limit})
		end := min(offset+min(limit, 3), len(items))
		return items[offset:end], end < len(items), nil
	}
	got, err := Gather(1, 5, page)
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4, 5}) || !slices.Equal(asked, [][2]int{{1, 5}, {4, 2}}) {
		t.Errorf("Gather(1, 5) = %v, %v, asked %v", got, err, asked)
	}
	if got, _ := Gather(0, 0, page); len(got) != 10 {
		t.Errorf("Gather(0, 0) = %v: a zero limit is the most a listing answers", got)
	}
	boom := errors.New("boom")
	got, err = Gather(0, 10, func(offset, limit int) ([]int, bool, error) {
		if offset > 0 {
			return nil, false, boom
		}
		return items[:3], true, nil
	})
	if !errors.Is(err, boom) || len(got) != 3 {
		t.Errorf("an error on the second page: %v, %v", got, err)
	}
}

// Receipts page backwards: each page is older and goes in front.
func TestGatherOlder(t *testing.T) {
	ids := []int64{1, 2, 3, 4, 5, 6, 7}
	page := func(before int64, limit int) ([]int64, bool, error) {
		end := len(ids)
		if before != 0 {
			end = slices.Index(ids, before)
		}
		start := max(end-min(limit, 3), 0)
		return ids[start:end], start > 0, nil
	}
	got, err := GatherOlder(0, 5, func(id int64) int64 { return id }, page)
	if err != nil || !slices.Equal(got, []int64{3, 4, 5, 6, 7}) {
		t.Errorf("GatherOlder(0, 5) = %v, %v", got, err)
	}
}
