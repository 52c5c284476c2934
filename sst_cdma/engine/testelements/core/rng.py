"""SST-core's random number generators (``SST::RNG``) as its test elements use them:
``MersenneRNG`` (the Mersenne Twister seeded with one 32-bit number, SST's tempering and
``nextUniform`` = next / (2^32 - 1)) and ``MarsagliaRNG`` (Marsaglia's multiply-with-carry on
two 32-bit words). Seeded alike, they give SST's sequences: ``StatisticsComponent.float``
seeded 5 reproduces the reference statistics of SST-core 16 to the last digit."""
from __future__ import annotations

MASK32 = 0xFFFFFFFF
#: SST's MERSENNE_UINT32_MAX, by which nextUniform divides
MERSENNE_MAX = 4294967295.0
#: SST's MarsagliaRNG scale: (next + 1) times this is in (0, 1]
MARSAGLIA_SCALE = 2.328306435454494e-10


class SSTRandom:
    """What both generators share: 64-bit and signed draws built from 32-bit ones, as SST's."""

    def generateNextUInt32(self) -> int:
        """The next 32-bit draw."""
        raise NotImplementedError

    def nextUniform(self) -> float:
        """A float in [0, 1]."""
        raise NotImplementedError

    def generateNextUInt64(self) -> int:
        """Two 32-bit draws, the first in the high word."""
        first = self.generateNextUInt32()
        return (first << 32) | self.generateNextUInt32()

    def generateNextInt32(self) -> int:
        """A 32-bit draw read as signed."""
        value = self.generateNextUInt32()
        return value - (1 << 32) if value >= 1 << 31 else value

    def generateNextInt64(self) -> int:
        """A 64-bit draw read as signed."""
        value = self.generateNextUInt64()
        return value - (1 << 64) if value >= 1 << 63 else value


class MersenneRNG(SSTRandom):
    """SST's ``MersenneRNG(seed)``."""

    def __init__(self, seed: int) -> None:
        state = [seed & MASK32]
        for i in range(1, 624):
            state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + i) & MASK32)
        self.state = state
        self.index = 0

    def _next_batch(self) -> None:
        n = self.state
        for i in range(624):
            y = (n[i] & 0x80000000) + (n[(i + 1) % 624] & 0x7FFFFFFF)
            n[i] = n[(i + 397) % 624] ^ (y >> 1)
            if y % 2:
                n[i] ^= 2567483615

    def generateNextUInt32(self) -> int:
        """The next tempered word."""
        if self.index == 0:
            self._next_batch()
        y = self.state[self.index]
        y ^= y >> 11
        y ^= (y << 7) & 2636928640
        y ^= (y << 15) & 4022730752
        y ^= y >> 18
        self.index = (self.index + 1) % 624
        return y & MASK32

    def nextUniform(self) -> float:
        """next / (2^32 - 1)."""
        return self.generateNextUInt32() / MERSENNE_MAX


class MarsagliaRNG(SSTRandom):
    """SST's ``MarsagliaRNG(z, w)``; without seeds (or with a zero one) SST's defaults."""

    def __init__(self, z: int = 0, w: int = 0) -> None:
        if z == 0 or w == 0:
            z, w = 362436069, 521288629
        self.z, self.w = z & MASK32, w & MASK32

    def generateNextUInt32(self) -> int:
        """The next multiply-with-carry word."""
        self.z = (36969 * (self.z & 65535) + (self.z >> 16)) & MASK32
        self.w = (18000 * (self.w & 65535) + (self.w >> 16)) & MASK32
        return ((self.z << 16) + self.w) & MASK32

    def nextUniform(self) -> float:
        """(next + 1) * 2.328306435454494e-10."""
        return (self.generateNextUInt32() + 1.0) * MARSAGLIA_SCALE


def sst_rng(kind: str, seed: int, seed_w: int, seed_z: int) -> SSTRandom:
    """The generator SST's StatisticsComponent picks from its ``rng`` param (any case):
    Mersenne with ``seed``, or Marsaglia with ``seed_z`` and ``seed_w``."""
    if kind.lower() == "marsaglia":
        return MarsagliaRNG(seed_z, seed_w)
    return MersenneRNG(seed)
