package devstack

import (
	"context"
	"errors"
	"fmt"
	"github.com/drover-crawl/drover/envconf"
	"net"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/segmentio/kafka-go"
	"go.temporal.io/sdk/client"
)

// Bounds of the service checks.
const (
	// checkTimeout bounds one check when ctx has no earlier deadline.
	checkTimeout = 5 * time.Second
	// RabbitMQStartTimeout bounds EnsureRabbitMQ's wait for a broker it started.
	RabbitMQStartTimeout = 60 * time.Second
)

// CheckRabbitMQ dials amqpURL and returns nil when RabbitMQ answers, and
// otherwise a one-line error naming the URL (password redacted) and how to
// start RabbitMQ.
func CheckRabbitMQ(ctx context.Context, amqpURL string) error {
	ctx, cancel := boundCtx(ctx)
	defer cancel()
	if err := dialAMQP(ctx, amqpURL); err != nil {
		return fmt.Errorf("RabbitMQ at %s unreachable: %s. Start it with `rabbitmq-server -detached` "+
			"(Debian/Ubuntu: `apt-get install rabbitmq-server`), or set AMQP_URL", campaign.Redact(amqpURL), oneLine(err))
	}
	return nil
}

// EnsureRabbitMQ is CheckRabbitMQ that, when the broker is unreachable, the
// URL points at this machine and rabbitmq-server is installed, starts it
// with `rabbitmq-server -detached` and waits up to 60 s for it to answer.
func EnsureRabbitMQ(ctx context.Context, amqpURL string) error {
	err := CheckRabbitMQ(ctx, amqpURL)
	if err == nil || !isLocalURL(amqpURL) {
		return err
	}
	bin, lookErr := exec.LookPath("rabbitmq-server")
	if lookErr != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, RabbitMQStartTimeout)
	defer cancel()
	// -detached returns once the node is forked; it answers a few seconds later.
	if out, runErr := exec.CommandContext(startCtx, bin, "-detached").CombinedOutput(); runErr != nil {
		return fmt.Errorf("RabbitMQ at %s unreachable and `rabbitmq-server -detached` failed: %v: %s",
			campaign.Redact(amqpURL), runErr, oneLine(errors.New(strings.TrimSpace(string(out)))))
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		lastErr := dialAMQP(startCtx, amqpURL)
		if lastErr == nil {
			return nil
		}
		select {
		case <-startCtx.Done():
			return fmt.Errorf("RabbitMQ at %s did not answer within %s of `rabbitmq-server -detached`: %s; "+
				"see /var/log/rabbitmq/", campaign.Redact(amqpURL), RabbitMQStartTimeout, oneLine(lastErr))
		case <-tick.C:
		}
	}
}

// dialAMQP returns nil once a node of amqpURL (envconf.AMQPAddrs) takes a
// connection, or every node's error.
func dialAMQP(ctx context.Context, amqpURL string) error {
	var errs []error
	for _, u := range envconf.AMQPAddrs(amqpURL) {
		err := dialAMQPNode(ctx, u)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func dialAMQPNode(ctx context.Context, amqpURL string) error {
	conn, err := amqp.DialConfig(amqpURL, amqp.Config{
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The handshake deadline; amqp091 clears it once the connection is open.
			deadline, _ := ctx.Deadline()
			return c, c.SetDeadline(deadline)
		},
	})
	if err != nil {
		return err
	}
	return conn.Close()
}

// CheckTemporal returns nil when a Temporal frontend answers a health check
// at addr, and otherwise a one-line error naming addr and how to start one.
func CheckTemporal(ctx context.Context, addr string) error {
	ctx, cancel := boundCtx(ctx)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger()})
	if err == nil {
		c.Close()
		return nil
	}
	return fmt.Errorf("Temporal at %s unreachable: %s. Start the dev stack with `make dev`, or set TEMPORAL_ADDRESS",
		addr, oneLine(err))
}

// CheckKafka returns nil when one of brokers answers a Kafka ApiVersions
// request, and otherwise a one-line error naming them and how to start one.
func CheckKafka(ctx context.Context, brokers []string) error {
	ctx, cancel := boundCtx(ctx)
	defer cancel()
	if len(brokers) == 0 {
		return errors.New("no Kafka brokers given: set KAFKA_BROKERS (the dev stack's is 127.0.0.1:9092)")
	}
	var lastErr error
	for _, b := range brokers {
		conn, err := kafka.DialContext(ctx, "tcp", b)
		if err == nil {
			_ = conn.SetDeadline(deadlineOf(ctx))
			_, err = conn.ApiVersions()
			conn.Close()
			if err == nil {
				return nil
			}
		}
		lastErr = err
	}
	return fmt.Errorf("Kafka at %s unreachable: %s. Start the dev stack with `make dev` (it runs an in-memory Kafka), or set KAFKA_BROKERS",
		strings.Join(brokers, ","), oneLine(lastErr))
}

func isLocalURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	h := p.Hostname()
	if h == "" || h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// boundCtx gives ctx a deadline checkTimeout away unless it has an earlier one.
func boundCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, checkTimeout)
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// oneLine flattens multi-line errors (gRPC's, a command's output) so a
// message stays on one line.
func oneLine(err error) string {
	if err == nil {
		return "unknown error"
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
