// pulsar-flex producers and consumers against a Node (node.js), quiet and
// with the settings every test here shares.
'use strict';
const { Producer, Consumer, logLevel } = require('pulsar-flex');

const quiet = { logLevel: logLevel.NOTHING === undefined ? logLevel.ERROR : logLevel.NOTHING };

function flexProducer(node, topic, extra = {}) {
  return new Producer({ topic, discoveryServers: node.pulsarServers, producerAccessMode: Producer.ACCESS_MODES.SHARED,
    ...quiet, ...extra });
}

// The consumer is named after its subscription unless `extra` names it.
function flexConsumer(node, topic, subscription, subType, extra = {}) {
  return new Consumer({ topic, discoveryServers: node.pulsarServers, subscription, subType,
    consumerName: subscription, receiveQueueSize: 100, ...quiet, ...extra });
}

module.exports = { flexProducer, flexConsumer, quiet };
