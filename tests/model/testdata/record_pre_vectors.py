#!/usr/bin/env python3
"""Records llama.cpp's tokenizations for pre-tokenizers that have no shared
test vocabulary (deepseek-coder, tekken): the shared GPT-2 byte-level BPE
vocabulary is rewritten with another tokenizer.ggml.pre, and llama.cpp's
llama-tokenize tokenizes every string of vocab/pre_vectors.inp with it
(no BOS, no special-token parsing). Writes vocab/gpt-2.PRE.out, one line of
space-separated ids per string, the format of ../shared/vocab/*.out that
vocab_vectors_test.cc reads.

Usage: record_pre_vectors.py LLAMA_TOKENIZE [PRE ...]
(LLAMA_TOKENIZE: a llama-tokenize whose libraries load, e.g. a copy of
../shared/tools/llama.cpp/bin with its library links restored.)
"""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, '../../../../shared/vocab/ggml-vocab-gpt-2.gguf')
SEPARATOR = '\n__ggml_vocab_test__\n'
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def skip_value(data, pos, vtype):
    """Returns the offset just past a GGUF value of type vtype at pos."""
    if vtype in FIXED:
        return pos + FIXED[vtype]
    if vtype == 8:  # string: u64 length, bytes
        (n,) = struct.unpack_from('<Q', data, pos)
        return pos + 8 + n
    if vtype == 9:  # array: u32 item type, u64 count, items
        item, count = struct.unpack_from('<IQ', data, pos)
        pos += 12
        if item in FIXED:
            return pos + FIXED[item] * count
        for _ in range(count):
            pos = skip_value(data, pos, item)
        return pos
    raise ValueError(f'unknown GGUF value type {vtype} at {pos}')


def with_pre(data, pre):
    """Returns a copy of a tensor-free GGUF with tokenizer.ggml.pre = pre."""
    magic, version, n_tensors, n_kv = struct.unpack_from('<4sIQQ', data, 0)
    assert magic == b'GGUF' and n_tensors == 0, 'expects a vocabulary-only GGUF'
    out = bytearray(data[:24])
    pos = 24
    for _ in range(n_kv):
        (klen,) = struct.unpack_from('<Q', data, pos)
        key = data[pos + 8:pos + 8 + klen].decode()
        (vtype,) = struct.unpack_from('<I', data, pos + 8 + klen)
        end = skip_value(data, pos + 12 + klen, vtype)
        if key == 'tokenizer.ggml.pre':
            value = pre.encode()
            out += data[pos:pos + 12 + klen] + struct.pack('<Q', len(value))
            out += value
        else:
            out += data[pos:end]
        pos = end
    out += b'\0' * (-len(out) % 32)
    return bytes(out)


def tokenize(tool, model, text):
    run = subprocess.run(
        [tool, '-m', model, '--stdin', '--ids', '--no-bos',
         '--no-parse-special', '--no-escape', '--log-disable'],
        input=text.encode(), capture_output=True, check=True)
    line = run.stdout.decode().strip().splitlines()[-1]
    return [int(t) for t in line.strip('[]').split(',') if t.strip()]


def main():
    tool = sys.argv[1]
    pres = sys.argv[2:] or ['deepseek-coder', 'tekken']
    with open(os.path.join(HERE, 'vocab/pre_vectors.inp'), encoding='utf-8', newline='') as f:
        inputs = f.read().split(SEPARATOR)[:-1]
    data = open(VOCAB, 'rb').read()
    with tempfile.TemporaryDirectory() as tmp:
        for pre in pres:
            model = os.path.join(tmp, f'gpt-2.{pre}.gguf')
            with open(model, 'wb') as f:
                f.write(with_pre(data, pre))
            rows = [' '.join(map(str, tokenize(tool, model, s))) for s in inputs]
            path = os.path.join(HERE, f'vocab/gpt-2.{pre}.out')
            with open(path, 'w') as f:
                f.write('\n'.join(rows) + '\n')
            print(f'{path}: {len(rows)} strings')


if __name__ == '__main__':
    main()
