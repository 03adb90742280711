package api

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

func metricsMiddleware(reg prometheus.Registerer) (echo.MiddlewareFunc, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eskv_http_request_seconds",
		Help:    "HTTP request latency by route, method and status.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"route", "method", "status"})
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			h.WithLabelValues(c.Path(), c.Request().Method, strconv.Itoa(c.Response().Status)).Observe(time.Since(start).Seconds())
			return nil
		}
	}, nil
}
