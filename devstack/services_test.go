package devstack

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/testenv"
)

func TestCheckRabbitMQUnreachable(t *testing.T) {
	addr := freeAddr(t)
	err := CheckRabbitMQ(context.Background(), "amqp://guest:secret@"+addr+"/")
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, "RabbitMQ at amqp://guest:***@"+addr+"/ unreachable: ")
	require.Contains(t, msg, "rabbitmq-server -detached")
	require.Contains(t, msg, "set AMQP_URL")
	require.NotContains(t, msg, "secret")
	require.NotContains(t, msg, "\n")
}

// The machine's RabbitMQ (running on the development machines and in CI,
// as .ci/run makes sure); EnsureRabbitMQ starts it if it is stopped.
func TestEnsureRabbitMQ(t *testing.T) {
	testenv.NeedsRabbitMQ(t)
	ctx := context.Background()
	require.NoError(t, EnsureRabbitMQ(ctx, "amqp://guest:guest@127.0.0.1:5672/"))
	require.NoError(t, CheckRabbitMQ(ctx, "amqp://guest:guest@127.0.0.1:5672/"))
}

func TestIsLocalURL(t *testing.T) {
	require.True(t, isLocalURL("amqp://guest:guest@127.0.0.1:5672/"))
	require.True(t, isLocalURL("amqp://localhost/"))
	require.True(t, isLocalURL("amqp://[::1]:5672/"))
	require.False(t, isLocalURL("amqp://rabbit.example.com/"))
}
