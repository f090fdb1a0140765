package ratelimit

// NewWithMaxKeys is New with a smaller bound on the keys kept (tests).
var NewWithMaxKeys = newLimiter
