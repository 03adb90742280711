package contract

// MaxFieldStringBytes is the longest string the projection indexes for
// filters, in UTF-8 bytes: an entry whose field holds a longer string
// matches no filter on that field.
const MaxFieldStringBytes = 256

// FilterOp is how a filter compares a field with its value.
type FilterOp string

// The comparisons. Numbers compare numerically, strings by their UTF-8
// bytes; booleans and null only take FilterEq.
const (
	FilterEq  FilterOp = "eq"
	FilterNe  FilterOp = "ne"
	FilterLt  FilterOp = "lt"
	FilterLte FilterOp = "lte"
	FilterGt  FilterOp = "gt"
	FilterGte FilterOp = "gte"
)

// FilterOps lists every FilterOp, in the order messages name them.
var FilterOps = []FilterOp{FilterEq, FilterNe, FilterLt, FilterLte, FilterGt, FilterGte}

// Valid reports whether o is one of FilterOps.
func (o FilterOp) Valid() bool {
	for _, v := range FilterOps {
		if v == o {
			return true
		}
	}
	return false
}
