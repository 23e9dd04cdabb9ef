package report

import "fmt"

// counted says n with its noun, singular for one: "1 request", "2 requests".
func counted[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
