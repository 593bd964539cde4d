package engineapi

// The engine cuts a listing's answer to fit one protocol frame and says
// More; its client, and its commands reading the database while it is
// stopped, gather the pages up to the limit asked for, the same way.

// MaxList is the most one listing answers, whatever it is asked for.
const MaxList = 1000

// ListLimit is a listing's limit as the engine applies it: MaxList unless
// asked for fewer.
func ListLimit(n int) int {
	if n <= 0 || n > MaxList {
		return MaxList
	}
	return n
}

// Gather collects up to ListLimit(limit) items of a listing answered a page
// at a time from offset on: page answers the items from its offset, at most
// its limit of them, and whether more follow.
func Gather[T any](offset, limit int, page func(offset, limit int) ([]T, bool, error)) ([]T, error) {
	want := ListLimit(limit)
	out := []T{}
	for {
		items, more, err := page(offset+len(out), want-len(out))
		if err != nil {
			return out, err
		}
		out = append(out, items...)
		if !more || len(items) == 0 || len(out) >= want {
			return out, nil
		}
	}
}

// GatherOlder is Gather for a listing that pages backwards, oldest first
// (receipts): page answers at most its limit of the items before the cursor
// (0: the newest), oldest first, and whether older ones remain; cursor is
// an item's own, the next page ends before the oldest gathered.
func GatherOlder[T any](before int64, limit int, cursor func(T) int64, page func(before int64, limit int) ([]T, bool, error)) ([]T, error) {
	want := ListLimit(limit)
	out := []T{}
	for {
		items, more, err := page(before, want-len(out))
		if err != nil {
			return out, err
		}
		out = append(items, out...) // each page is older
		if !more || len(items) == 0 || len(out) >= want {
			return out, nil
		}
		before = cursor(items[0])
	}
}
