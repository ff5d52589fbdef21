// Sarama (Go; Debian's golang-github-shopify-sarama-dev, built with
// Debian's Go in GOPATH mode) against the broker, as its users write it:
// the cluster admin creates a topic and the client lists it, a synchronous producer
// with the default settings but for the protocol version sends keyed
// values, a consumer group member reads them all and marks them, and
// the group commits on close.
//
// Sarama's default protocol version is Kafka 0.8.2, which has no
// consumer groups; its users set config.Version to their cluster's
// (here 2.1.0, the newest this Sarama knows that the broker serves).
//
// usage: sarama_client BOOTSTRAP TOPIC GROUP COUNT
//
// Prints "listed TOPIC", "acked COUNT", "record PARTITION OFFSET KEY VALUE"
// per message read and "committed"; broker/tests/clients.rs checks them.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V2_1_0_0
	c.Producer.Return.Successes = true // a SyncProducer needs it
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

func admin(bootstrap, topic string) {
	a, err := sarama.NewClusterAdmin([]string{bootstrap}, config())
	if err != nil {
		fail("admin", err)
	}
	defer a.Close()
	detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}
	if err := a.CreateTopic(topic, detail, false); err != nil {
		fail("create topic", err)
	}
	// ClusterAdmin.ListTopics of this Sarama sends DescribeConfigs v0,
	// which Kafka 4.0 no longer serves (KIP-896) and neither does the
	// broker: topics are listed through the client's metadata.
	c, err := sarama.NewClient([]string{bootstrap}, config())
	if err != nil {
		fail("client", err)
	}
	defer c.Close()
	topics, err := c.Topics()
	if err != nil {
		fail("list topics", err)
	}
	for _, t := range topics {
		if t == topic {
			fmt.Println("listed", topic)
		}
	}
}

func produce(bootstrap, topic string, count int) {
	p, err := sarama.NewSyncProducer([]string{bootstrap}, config())
	if err != nil {
		fail("producer", err)
	}
	for i := 0; i < count; i++ {
		message := &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%d", i%7)),
			Value: sarama.StringEncoder(fmt.Sprintf("value-%d", i)),
		}
		if _, _, err := p.SendMessage(message); err != nil {
			fail("send", err)
		}
	}
	fmt.Println("acked", count)
	if err := p.Close(); err != nil {
		fail("producer close", err)
	}
}

// member prints what its claims deliver and marks it (committed by the
// group's offset manager) until count messages went by.
type member struct {
	mu    sync.Mutex
	seen  int
	count int
	done  chan struct{}
	once  sync.Once
}

func (m *member) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for r := range c.Messages() {
		m.mu.Lock()
		fmt.Println("record", r.Partition, r.Offset, string(r.Key), string(r.Value))
		s.MarkMessage(r, "")
		m.seen++
		if m.seen >= m.count {
			m.once.Do(func() { close(m.done) })
		}
		m.mu.Unlock()
	}
	return nil
}

func consume(bootstrap, topic, group string, count int) {
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config())
	if err != nil {
		fail("consumer group", err)
	}
	m := &member{count: count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil {
				fail("consume", err)
			}
		}
	}()
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		fail("consume", fmt.Errorf("only %d of %d messages", m.seen, count))
	}
	cancel()
	// Closing the group commits what was marked.
	if err := g.Close(); err != nil {
		fail("consumer group close", err)
	}
	fmt.Println("committed")
}

func main() {
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("COUNT", err)
	}
	admin(bootstrap, topic)
	produce(bootstrap, topic, count)
	consume(bootstrap, topic, group, count)
}
