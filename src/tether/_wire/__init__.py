"""The wire protocol of ``tether server`` (issue #21), shared by the server and its client.

``tether.proto`` is the protocol reference; ``tether_pb2*.py`` are generated from it by
``scripts/gen_proto.sh`` (never edited by hand); ``codec`` turns records into messages and
back; ``errors`` maps tether's errors to gRPC status codes and back; ``roles`` says which
token role may call which method.
"""
