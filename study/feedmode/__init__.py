"""The CNN feed-mode study: is `tf.placeholder` really 4-5x faster than a constant? And how do
the other frameworks' ways of feeding the same network compare? (docs/feedmode.md)"""
